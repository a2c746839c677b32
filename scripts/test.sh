#!/usr/bin/env bash
# Set up and run every test: lint, the lab extension's unit tests (Jest), then pytest
# (unit, property, real Jupyter server, real kernel, real browser). Extra arguments go to
# pytest (e.g. -k restart -x). System packages (Chromium, Node) come from
# scripts/ci-browser-deps.sh, which .ci/run calls first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
.venv/bin/python -m ruff check jupyter_gpusched tests benchmarks
(cd labextension && PATH="$PWD/../.venv/bin:$PATH" jlpm install && PATH="$PWD/../.venv/bin:$PATH" jlpm test)
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
