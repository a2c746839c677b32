#!/usr/bin/env bash
# What the JupyterHub-mode tests need beyond PyPI, on a Debian machine:
#   - PostgreSQL server binaries (Debian's `postgresql`; the tests start their own throwaway
#     cluster with initdb/pg_ctl, nothing is configured system-wide),
#   - configurable-http-proxy (npm), JupyterHub's proxy.
# Idempotent, and quick when both are present. As root it installs system-wide; otherwise it
# uses sudo for apt, and puts the proxy in ~/.cache/jupyter-gpusched/chp when npm -g is not writable
# (the test harness looks there too).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
CHP_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/jupyter-gpusched/chp"

have_postgres() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}
have_chp() {
  command -v configurable-http-proxy >/dev/null 2>&1 || [ -x "$CHP_CACHE/node_modules/.bin/configurable-http-proxy" ]
}

if have_postgres && have_chp; then
  echo "ci-hub-deps: postgresql and configurable-http-proxy already installed"
  exit 0
fi

packages=()
have_postgres || packages+=(postgresql)
if ! have_chp && ! command -v npm >/dev/null 2>&1; then packages+=(nodejs npm); fi
if [ ${#packages[@]} -gt 0 ]; then
  echo "ci-hub-deps: apt-get install ${packages[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
fi

if ! have_chp; then
  # configurable-http-proxy 5 needs Node >= 20; Debian 12's Node is 18: use 4.x there.
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  spec="configurable-http-proxy"
  if [ "$node_major" -lt 20 ]; then spec="configurable-http-proxy@4"; fi
  if [ "$(id -u)" -eq 0 ] || [ -w "$(npm prefix -g)/lib" ]; then
    echo "ci-hub-deps: npm install -g $spec"
    npm install -g --no-fund --no-audit --loglevel=error "$spec"
  else
    echo "ci-hub-deps: npm install $spec into $CHP_CACHE"
    mkdir -p "$CHP_CACHE"
    npm install --prefix "$CHP_CACHE" --no-fund --no-audit --loglevel=error "$spec"
  fi
fi
have_postgres && have_chp && echo "ci-hub-deps: ready"
