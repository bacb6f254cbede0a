#!/usr/bin/env bash
# Build the real kube-apiserver and etcd the tests run (tests/support/kube_apiserver.py) from their
# upstream Go modules, through the wrapper modules in .ci/kube/ (their go.mod pins the versions; the
# kube-apiserver one pins every k8s.io staging module with a `replace`, which a plain `go install`
# of k8s.io/kubernetes refuses). Binaries go to a cache keyed by the two versions:
#   ${FIREBREAK_KUBE_CACHE:-$HOME/.cache/firebreak/kube}/<k8s-version>-<etcd-version>/bin/
# and are reused when present. Prints that bin dir last, so callers can do:
#   FIREBREAK_KUBE_BIN=$(bash .ci/build-kube.sh | tail -n1)
# Needs Go (go.mod's `go` line; the proxy serves a newer toolchain if GOTOOLCHAIN allows); no Go or
# a failed build exits non-zero. Cold: a few minutes on 2 cores; warm (Go's caches): seconds.
set -euo pipefail
cd "$(dirname "$0")/kube"

log() { echo "build-kube: $*" >&2; }
die() { echo "build-kube: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 || die "Go is required to build kube-apiserver and etcd for the tests (https://go.dev/dl/; go.mod wants $(awk '/^go /{print $2}' apiserver/go.mod))"

# The version a wrapper module requires of its one direct dependency.
required() { awk -v m="$2" '$1 == "require" && $2 == m {print $3} $1 == m && !/indirect/ {print $2}' "$1/go.mod" | head -n1; }
K8S=$(required apiserver k8s.io/kubernetes)
ETCD=$(required etcd go.etcd.io/etcd/server/v3)
[ -n "$K8S" ] && [ -n "$ETCD" ] || die "could not read the k8s.io/kubernetes and etcd versions from .ci/kube/*/go.mod"

CACHE="${FIREBREAK_KUBE_CACHE:-$HOME/.cache/firebreak/kube}/$K8S-$ETCD"
BIN="$CACHE/bin"
if [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/etcd" ]; then
  log "reusing $BIN"
  echo "$BIN"
  exit 0
fi

# Go 1.27 turns the encoding/json v2 experiment on by default, and a kube-apiserver built so serves
# broken OpenAPI (every `kubectl apply` then fails with "failed to download openapi").
GOVER=$(go env GOVERSION)
case "$GOVER" in
  go1.2[0-6]|go1.2[0-6].*) ;;
  *) export GOEXPERIMENT="${GOEXPERIMENT:+$GOEXPERIMENT,}nojsonv2" ;;
esac

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0  # static, as upstream releases the server binaries

minor=${K8S#v1.}; minor=${minor%%.*}
log "building kube-apiserver $K8S with $GOVER"
(cd apiserver && go build -trimpath -o "$work/kube-apiserver" \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$K8S -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
  k8s.io/kubernetes/cmd/kube-apiserver) >&2
log "building etcd $ETCD with $GOVER"
(cd etcd && go build -trimpath -o "$work/etcd" go.etcd.io/etcd/server/v3) >&2
"$work/kube-apiserver" --version >&2
"$work/etcd" --version | head -n1 >&2

# Into place in one step: a half-built cache dir is never taken for a built one.
rm -rf "$BIN"
mv "$work" "$BIN"
trap - EXIT
log "built into $BIN"
echo "$BIN"
