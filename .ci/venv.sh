# The project virtualenv .venv: the one bootstrap behind ./firebreak and .ci/run (both source
# this file from the checkout's root; bash).
#
# Everything runs in .venv: the system python3 on Debian 12 / Ubuntu 24.04 is "externally
# managed" and refuses `pip install`. The caller sets PY (the interpreter that creates .venv,
# 3.11+) and VENV_WHO (the name its messages start with); VENV_APT=1 lets ensure_venv install
# python3-venv with apt-get when venv cannot bootstrap pip (CI, as root or with sudo -n).

VENV=.venv
VPY=$VENV/bin/python
STAMP=$VENV/.firebreak-installed # "installed from this checkout", written by venv_install

venv_fail() {
  echo "$VENV_WHO: $*" >&2
  exit 1
}

# ./firebreak's fast path: one small interpreter start, no dependency imports. True when both
# distributions are installed editable from this checkout and no pyproject.toml is newer than the
# stamp. -I (isolated) keeps the checkout itself (bot/, firebreak.egg-info) off sys.path, so this
# sees only what is installed in the venv.
venv_installed() {
  [ -f "$STAMP" ] && [ ! pyproject.toml -nt "$STAMP" ] && [ ! world/pyproject.toml -nt "$STAMP" ] \
    && "$VPY" -I - 2>/dev/null <<'PYEOF'
import importlib.metadata as md, importlib.util as iu, os, sys
md.distribution("firebreak"), md.distribution("firebreak-world")
def home(name, up):  # the editable installs must point at this checkout
    spec = iu.find_spec(name)
    path = os.path.realpath(spec.origin) if spec is not None and spec.origin else ""
    for _ in range(up):
        path = os.path.dirname(path)
    return path
here = os.path.realpath(os.getcwd())
ok = home("bot", 2) == here and home("fbworld", 3) == here
sys.exit(not (ok and all(iu.find_spec(m) for m in ("slack_bolt", "slack_sdk", "fakeredis", "redis", "pydantic", "jsonschema"))))
PYEOF
}

# A venv we can install into: its python starts, is 3.11+, and has pip.
venv_usable() {
  "$VPY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    && "$VPY" -m pip --version >/dev/null 2>&1
}

# Debian/Ubuntu ship venv's pip bootstrap (ensurepip) in a separate package: python3-venv (and
# python3.X-venv for the interpreter's own version). Installs the missing ones; false when there
# is nothing it can install (no apt-get, or both installed and ensurepip still missing).
venv_apt_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  local ver pkg missing=() pkgs=() sudo=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; fi
  ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  for pkg in python3-venv "python$ver-venv"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  # python3.X-venv may not exist (an interpreter not from the distribution); python3-venv must.
  for pkg in "${missing[@]}"; do
    if [ "$pkg" = python3-venv ] || apt-cache show "$pkg" >/dev/null 2>&1; then pkgs+=("$pkg"); fi
  done
  [ "${#pkgs[@]}" -gt 0 ] || return 1
  echo "$VENV_WHO: installing ${pkgs[*]} (apt-get)" >&2
  # Called as a condition, where set -e does not stop the function: each step checks its own.
  $sudo apt-get update -qq >&2 || venv_fail "apt-get update failed"
  $sudo apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >&2 || venv_fail "apt-get could not install ${pkgs[*]}"
}

# Creates .venv with $PY unless a usable one is there; on failure says what to do and exits 1.
ensure_venv() {
  venv_usable && return 0
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
    || venv_fail "needs Python 3.11+ to create $VENV; '$PY' is not (set PYTHON=/path/to/python3.11)"
  echo "$VENV_WHO: creating $VENV with $PY…" >&2
  local out
  if ! out=$("$PY" -m venv --clear "$VENV" 2>&1); then
    if ! "$PY" -c 'import ensurepip' 2>/dev/null || [[ $out == *ensurepip* ]]; then
      if [ "${VENV_APT:-}" = 1 ] && venv_apt_install; then
        "$PY" -m venv --clear "$VENV" || venv_fail "could not create $VENV with '$PY -m venv'"
      else
        venv_fail "'$PY -m venv' cannot install pip: install the python3-venv package (sudo apt-get install python3-venv) and run again"
      fi
    else
      printf '%s\n' "$out" >&2
      venv_fail "could not create $VENV with '$PY -m venv'"
    fi
  fi
  venv_usable || venv_fail "$VENV was created but its python/pip does not run"
}

# Installs the product (with the pip extras in $1, e.g. "[test,dev]") and its simulated world
# (world/: the firebreak-world distribution the console, tests and bench/ run on, never in the
# product's wheel) editable into .venv, then stamps it.
venv_install() {
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install --no-input -q -e ./world -e ".${1:-}" >&2
  touch "$STAMP"
}
