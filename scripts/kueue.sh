#!/usr/bin/env bash
# Kueue, compiled from Go modules into the cache, for the Kueue admission mode's test and the side-by-side bench.
#
#   scripts/kueue.sh build    build the pinned kueue manager into the cache (idempotent); prints its path
#   scripts/kueue.sh path     print the binary's path (exit 1 if it is not built)
#   scripts/kueue.sh crds     print the folder holding the release's CRDs (from the module source)
#
# Built like scripts/helm.sh, through scripts/go-cache.sh (the control-plane build's caches, keyed by version).
# A cold build takes about 40 minutes on 2 cores, so CI does not build it: the Kueue tests run where this cache
# is warm (or with GPUSCHED_BUILD_KUEUE=1 bash scripts/test.sh).
# v0.15.x is the line built against the Kubernetes 1.34 libraries, the test control plane's version.
set -euo pipefail

KUEUE_VERSION=${GPUSCHED_KUEUE_VERSION:-v0.15.2}

log() { printf '[kueue] %s\n' "$*" >&2; }
# shellcheck source=scripts/go-cache.sh
source "$(dirname "$0")/go-cache.sh"
KEY="kueue-${KUEUE_VERSION}"

module_dir() {
  go_env
  go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'
}

case "${1:-}" in
  build) go_install_cached "$KEY" kueue "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" "-s -w" ;;
  path) [[ -x "$CACHE_ROOT/$KEY/bin/kueue" ]] && echo "$CACHE_ROOT/$KEY/bin/kueue" || exit 1 ;;
  crds) echo "$(module_dir)/config/components/crd/bases" ;;
  *) echo "usage: $0 build|path|crds" >&2; exit 2 ;;
esac
