#!/usr/bin/env bash
# Makes (once) a Python venv for the interop tests and installs what they import.
# Usage: ensure_venv.sh VENV_DIR MODULE=PIP_PACKAGE ...
# Exits 0 when every module imports; otherwise prints why and exits non-zero (the tests
# then skip, e.g. on a machine without python3 or without access to the package index).
set -u
venv=$1
shift
command -v python3 >/dev/null 2>&1 || { echo "python3 is not installed"; exit 3; }
mkdir -p "$(dirname "$venv")"
# Test programs may run in parallel (ctest -j): one of them builds the venv, the others wait.
exec 9>"$venv.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi
if [ ! -x "$venv/bin/python" ]; then
  if ! python3 -m venv "$venv" 2>&1; then
    rm -rf "$venv"
    echo "python3 -m venv failed (is the venv module installed?)"
    exit 4
  fi
fi
missing=()
for spec in "$@"; do
  mod=${spec%%=*}
  pkg=${spec#*=}
  "$venv/bin/python" -c "import $mod" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      --retries 1 --timeout 30 "${missing[@]}" 2>&1; then
    echo "pip install ${missing[*]} failed (no access to the package index?)"
    exit 5
  fi
fi
echo "venv ready: $venv"
