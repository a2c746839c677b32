#!/usr/bin/env bash
# Set up and run every test, on a fresh machine too (this is what CI's .ci/run calls):
#   1. system tools the tests need (when run as root on Debian: Chromium and Node, PostgreSQL and
#      configurable-http-proxy, Prometheus; each script is idempotent and only checks when all is there),
#   2. the Kubernetes control plane + kwok, and Helm beside them, built from Go modules into a cache outside
#      the repo, in the background while 3 and 4 run (~25 min the first time on a cold machine, nothing after;
#      GPUSCHED_SKIP_K8S_BUILD=1 skips them and the Kubernetes tests then skip with a message),
#   3. the virtual environment (.venv) with the package and its [test] extra,
#   4. checks: ruff (lint + format), mypy, the lab extension's ESLint/Prettier and Jest tests,
#   5. pytest: unit, property, layer contract, real Jupyter server, kernel, browser, hub, Kubernetes.
# Extra arguments go to pytest (e.g. -k restart -x).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  bash scripts/ci-browser-deps.sh
  bash scripts/ci-hub-deps.sh          # PostgreSQL + configurable-http-proxy for the hub tests
  bash scripts/ci-prometheus-deps.sh   # Prometheus + promtool for the gpu_busy forecast tests
else
  echo "test.sh: not root (or no apt-get): system packages are not installed; tests needing them skip" >&2
fi
helm_build=""
k8s_build=""
if [ "${GPUSCHED_SKIP_K8S_BUILD:-0}" != 1 ]; then
  # The control plane and Helm (for the chart tests) build in the background while the environment is
  # set up and checked below: on a cold machine that hides part of their ~25 min; once cached, nothing.
  helm_log="${TMPDIR:-/tmp}/gpusched-helm-build.log"
  bash scripts/helm.sh build >"$helm_log" 2>&1 &
  helm_build=$!
  k8s_log="${TMPDIR:-/tmp}/gpusched-k8s-build.log"
  bash scripts/k8s-testenv.sh build >"$k8s_log" 2>&1 &   # cached by version under ~/.cache/jupyter-gpusched/k8s
  k8s_build=$!
fi

bash scripts/setup.sh test
echo "test.sh: ruff, mypy, ESLint, Jest"
.venv/bin/python -m ruff check jupyter_gpusched tests benchmarks scripts notebooks
.venv/bin/python -m ruff format --check jupyter_gpusched tests benchmarks scripts notebooks
.venv/bin/python -m mypy
(
  cd labextension
  export PATH="$PWD/../.venv/bin:$PATH"
  jlpm install
  jlpm lint:check
  jlpm test
)
if [ -n "$k8s_build" ]; then
  if ! wait "$k8s_build"; then
    echo "test.sh: the Kubernetes control-plane build failed; its log:" >&2
    tail -n 40 "$k8s_log" >&2
    exit 1
  fi
  cat "$k8s_log"
  if [ "${GPUSCHED_BUILD_KUEUE:-0}" = 1 ]; then
    bash scripts/kueue.sh build        # opt-in: ~40 min cold (docs/kueue.md); tests/test_k8s_kueue.py skip without it
  fi
fi
if [ -n "$helm_build" ] && ! wait "$helm_build"; then
  echo "test.sh: the helm build failed (tests/test_k8s_chart.py will skip); its log:" >&2
  tail -n 20 "$helm_log" >&2
fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
