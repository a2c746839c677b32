#!/usr/bin/env bash
# Set up and start JupyterLab with jupyter-gpusched on the embedded local backend.
# Extra arguments go to `jupyter lab` (e.g. --port 9999 --no-browser).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
args=()
[ "$(id -u)" = 0 ] && args+=(--allow-root)  # containers often run as root
exec .venv/bin/jupyter lab "${args[@]}" "$@"
