#!/usr/bin/env bash
# Ensure the real service binaries used by the integration tests exist:
#   redis-server                  (apt-get install redis-server, if missing)
#   prometheus, promtool,         (Debian .debs extracted with dpkg-deb -x into
#   prometheus-alertmanager         $FIREBREAK_SERVICES_DIR; no service is started)
#
# Idempotent and quick when already installed. Prints the bin dir (the last
# line of stdout) so callers can do:  PATH="$(bash .ci/install-services.sh | tail -n1):$PATH"
# The bin dir also holds an `alertmanager` symlink to prometheus-alertmanager.
#
# Keep the default of FIREBREAK_SERVICES_DIR in sync with tests/support/prometheus.py.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

SERVICES_DIR="${FIREBREAK_SERVICES_DIR:-/opt/firebreak-services}"
BIN_DIR="$SERVICES_DIR/bin"

log() { echo "install-services: $*" >&2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
fi

APT_UPDATED=0
apt_update_once() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq >&2
    APT_UPDATED=1
  fi
}

# apt-get update only if the package lists do not know the package yet.
ensure_apt_knows() {
  local pkg
  for pkg in "$@"; do
    if ! apt-cache show "$pkg" >/dev/null 2>&1; then
      apt_update_once
      return
    fi
  done
}

# ---------------------------------------------------------------- redis
if ! command -v redis-server >/dev/null 2>&1; then
  ensure_apt_knows redis-server
  log "installing redis-server"
  if ! $SUDO apt-get install -y -qq --no-install-recommends redis-server >&2; then
    apt_update_once
    $SUDO apt-get install -y -qq --no-install-recommends redis-server >&2
  fi
fi

# ------------------------------------------------- prometheus + alertmanager
have_prom_bins() {
  [ -x "$BIN_DIR/prometheus" ] && [ -x "$BIN_DIR/promtool" ] && [ -x "$BIN_DIR/alertmanager" ] \
    && "$BIN_DIR/promtool" --version >/dev/null 2>&1
}

if ! have_prom_bins; then
  mkdir -p "$SERVICES_DIR"
  work="$(mktemp -d "$SERVICES_DIR/.download.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  # apt-get download as root drops privileges to _apt; let it write here.
  chmod 0777 "$work"
  ensure_apt_knows prometheus prometheus-alertmanager
  log "downloading prometheus prometheus-alertmanager debs"
  if ! (cd "$work" && apt-get download -qq prometheus prometheus-alertmanager >&2); then
    # Stale lists (404 on an updated version): refresh and retry once.
    apt_update_once
    (cd "$work" && apt-get download -qq prometheus prometheus-alertmanager >&2)
  fi
  extract="$SERVICES_DIR/root"
  rm -rf "$extract.new"
  mkdir -p "$extract.new"
  for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$extract.new"
  done
  rm -rf "$extract"
  mv "$extract.new" "$extract"
  mkdir -p "$BIN_DIR"
  ln -sfn "$extract/usr/bin/prometheus" "$BIN_DIR/prometheus"
  ln -sfn "$extract/usr/bin/promtool" "$BIN_DIR/promtool"
  ln -sfn "$extract/usr/bin/prometheus-alertmanager" "$BIN_DIR/prometheus-alertmanager"
  ln -sfn "$extract/usr/bin/prometheus-alertmanager" "$BIN_DIR/alertmanager"
  if [ -x "$extract/usr/bin/amtool" ]; then ln -sfn "$extract/usr/bin/amtool" "$BIN_DIR/amtool"; fi
  have_prom_bins || { log "prometheus binaries missing after extraction"; exit 1; }
  log "installed into $SERVICES_DIR"
fi

# The Debian alertmanager binary loads its notification templates from a
# compiled-in path (/usr/share/prometheus/alertmanager/default.tmpl) and exits
# at startup without them. Copy the (small) template files there; real files,
# not a symlink, so a later `apt-get install prometheus-alertmanager` is unaffected.
AM_SHARE=/usr/share/prometheus/alertmanager
if [ "$(readlink -f "$BIN_DIR/alertmanager")" = "$(readlink -f "$SERVICES_DIR/root/usr/bin/prometheus-alertmanager")" ] \
   && [ ! -f "$AM_SHARE/default.tmpl" ]; then
  log "copying alertmanager templates into $AM_SHARE"
  $SUDO mkdir -p "$AM_SHARE"
  $SUDO cp "$SERVICES_DIR/root$AM_SHARE/"*.tmpl "$AM_SHARE/"
fi

echo "$BIN_DIR"
