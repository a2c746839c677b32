#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv with the package installed
# editable. Usage: scripts/setup.sh [extra]   (extra: test, sim)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating the virtual environment .venv"
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
extra=${1:-}
target=.
[ -n "$extra" ] && target=".[$extra]"
echo "setup: installing jupyter-gpusched${extra:+ [$extra]} into .venv (the first time takes a few minutes:"
echo "setup: the dependencies download and the lab extension is built with Node.js)"
# One line per package, so a long first install visibly moves; pip's whole output goes to a log.
log=.venv/pip-install.log
set +e
.venv/bin/python -m pip install --progress-bar off -e "$target" 2>&1 | tee "$log" \
  | grep -E --line-buffered "^(Collecting|Building|Successfully)"
status=${PIPESTATUS[0]}
set -e
if [ "$status" != 0 ]; then
  tail -n 40 "$log"
  echo "setup: pip failed (exit $status); its whole output is in $log"
  exit "$status"
fi
echo "setup: done. Use the tools with: source .venv/bin/activate  (or call .venv/bin/jupyter directly)"
