#!/usr/bin/env bash
# Build the real controllers the lever tests run against the real kube-apiserver (Argo Rollouts, KEDA,
# Kueue, JobSet), each from its upstream Go module through a wrapper module in .ci/controllers/<name>/:
#   go.mod          pins the upstream module (and copies its `replace` lines: a dependency's replaces
#                   do not apply to the module that requires it)
#   tools.go        a blank import of the command, so `go mod tidy` keeps what it needs
#   controller.env  PKG (the command's import path), BINARY (its name) and DATA (paths inside the
#                   upstream module copied beside the binary: CRDs, webhook manifests)
# Each goes to a cache keyed by name and version, reused when present:
#   ${FIREBREAK_CONTROLLERS_CACHE:-$HOME/.cache/firebreak/controllers}/<name>-<version>/{bin,data}/
# Prints the cache root last (FIREBREAK_CONTROLLERS_DIR=$(bash .ci/build-controllers.sh | tail -n1)).
# Arguments name the controllers to build (default: all). No Go or a failed build exits non-zero:
# the lever tests never fall back to a stand-in for a controller that should be real.
set -euo pipefail
cd "$(dirname "$0")/controllers"

log() { echo "build-controllers: $*" >&2; }
die() { echo "build-controllers: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required to build the controllers the lever tests run (https://go.dev/dl/)"
ROOT="${FIREBREAK_CONTROLLERS_CACHE:-$HOME/.cache/firebreak/controllers}"
mkdir -p "$ROOT"

# The same reason as build-kube.sh: Go 1.27's encoding/json v2 default changes what these servers emit.
GOVER=$(go env GOVERSION)
case "$GOVER" in
  go1.2[0-6]|go1.2[0-6].*) ;;
  *) export GOEXPERIMENT="${GOEXPERIMENT:+$GOEXPERIMENT,}nojsonv2" ;;
esac
export CGO_ENABLED=0

names=("$@")
if [ "${#names[@]}" -eq 0 ]; then
  for d in */; do [ -f "$d/controller.env" ] && names+=("${d%/}"); done
fi

for name in "${names[@]}"; do
  [ -f "$name/controller.env" ] || die "no .ci/controllers/$name/controller.env"
  # shellcheck disable=SC1090
  MODULE="" PKG="" BINARY="" DATA="" LDFLAGS=""
  source "$name/controller.env"
  [ -n "$MODULE" ] && [ -n "$PKG" ] && [ -n "$BINARY" ] || die "$name/controller.env needs MODULE, PKG and BINARY"
  version=$(cd "$name" && go list -m -f '{{.Version}}' "$MODULE")
  [ -n "$version" ] || die "could not read the version of $MODULE from .ci/controllers/$name/go.mod"
  dest="$ROOT/$name-$version"
  if [ -x "$dest/bin/$BINARY" ]; then
    log "reusing $dest"
    continue
  fi
  work=$(mktemp -d "$ROOT/.build-$name.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  t0=$(date +%s)
  log "building $name ($PKG $version) with $GOVER"
  mkdir -p "$work/bin" "$work/data"
  (cd "$name" && go build -trimpath -ldflags "-s -w ${LDFLAGS//@VERSION@/$version}" -o "$work/bin/$BINARY" "$PKG") >&2
  src=$(cd "$name" && go list -m -f '{{.Dir}}' "$MODULE")
  for p in $DATA; do
    mkdir -p "$work/data/$(dirname "$p")"
    cp -r "$src/$p" "$work/data/$p"
    chmod -R u+w "$work/data/$p"  # the module cache is read-only
  done
  echo "$version" >"$work/VERSION"
  rm -rf "$dest"
  mv "$work" "$dest"  # into place in one step: a half-built dir is never taken for a built one
  trap - EXIT
  log "built $name into $dest in $(( $(date +%s) - t0 )) s"
done
echo "$ROOT"
