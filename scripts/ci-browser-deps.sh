#!/usr/bin/env bash
# Install, on a Debian machine as root, what the lab extension's build and the browser test need
# beyond Python packages: Node.js (builds labextension/ during `pip install`; JupyterLab's jlpm
# fetches the npm packages) and Debian's Chromium (/usr/bin/chromium, driven by Playwright in
# tests/test_browser.py). Idempotent: when both are there it only prints their versions.
set -euo pipefail

missing=()
command -v node >/dev/null 2>&1 || missing+=(nodejs)
[ -x /usr/bin/chromium ] || missing+=(chromium)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "ci-browser-deps: need root to install: ${missing[*]} (apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "ci-browser-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q "${missing[@]}"
fi

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 18 ]; then
  echo "ci-browser-deps: Node.js $(node --version) is too old to build the lab extension (need >= 18)" >&2
  exit 1
fi
echo "ci-browser-deps: node $(node --version), $(/usr/bin/chromium --version 2>/dev/null | head -n1)"
