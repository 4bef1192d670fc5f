#!/usr/bin/env bash
# Makes (once) a Python venv for the interop tests with the pinned packages of
# requirements.txt beside this script, and checks that the given modules import.
# Usage: ensure_venv.sh VENV_DIR MODULE...
# Exits 0 when every module imports; otherwise prints why and exits non-zero (the tests
# then skip, or fail under AF_REQUIRE_INTEROP=1).
set -u
venv=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
requirements=$here/requirements.txt
command -v python3 >/dev/null 2>&1 || { echo "python3 is not installed"; exit 3; }
mkdir -p "$(dirname "$venv")" || { echo "cannot create the folder of $venv"; exit 4; }
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
# The stamp holds the requirements it was made from: a changed pin reinstalls.
stamp=$venv/.af-requirements
if ! cmp -s "$requirements" "$stamp"; then
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
      --retries 1 --timeout 30 -r "$requirements" 2>&1; then
    echo "pip install -r $requirements failed (no access to the package index?)"
    exit 5
  fi
  cp "$requirements" "$stamp"
fi
for mod in "$@"; do
  if ! out=$("$venv/bin/python" -c "import $mod" 2>&1); then
    echo "python module $mod does not import from $venv: $out"
    exit 6
  fi
done
echo "venv ready: $venv"
