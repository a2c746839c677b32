#!/usr/bin/env bash
# Set up and run every test. Extra arguments go to pytest (e.g. -k restart -x).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/python -m ruff check jupyter_gpusched tests benchmarks
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
