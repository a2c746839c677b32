#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv with the package installed
# editable. Usage: scripts/setup.sh [extra]   (extra: test, sim)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
extra=${1:-}
if [ -n "$extra" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extra]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
