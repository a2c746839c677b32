#!/usr/bin/env bash
# What the Prometheus forecast tests (tests/test_forecast_prometheus.py) need beyond PyPI, on a
# Debian machine: the `prometheus` server and `promtool` (Debian's `prometheus` package). The
# tests start their own throwaway server on a free port; nothing is configured system-wide.
# Idempotent, and quick when both are present. As root it installs directly; otherwise with sudo.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
  echo "ci-prometheus-deps: prometheus and promtool already installed"
  exit 0
fi

echo "ci-prometheus-deps: apt-get install prometheus"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package enables a system service on :9090 where systemd runs; the tests do not use it.
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
  echo "ci-prometheus-deps: stopping the prometheus service the package started"
  $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
fi
command -v prometheus >/dev/null && command -v promtool >/dev/null && echo "ci-prometheus-deps: ready"
