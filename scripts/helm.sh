#!/usr/bin/env bash
# Helm, compiled from Go modules into the cache, for rendering deploy/helm/jupyter-gpusched in tests.
#
#   scripts/helm.sh build     build the pinned helm binary into the cache (idempotent); prints its path
#   scripts/helm.sh path      print the binary's path (exit 1 if it is not built)
#
# Built like scripts/kueue.sh, through scripts/go-cache.sh (the control-plane build's caches, keyed by version).
set -euo pipefail

HELM_VERSION=${GPUSCHED_HELM_VERSION:-v4.3.2}   # helm.sh/helm/v4 release

log() { printf '[helm] %s\n' "$*" >&2; }
# shellcheck source=scripts/go-cache.sh
source "$(dirname "$0")/go-cache.sh"
KEY="helm-${HELM_VERSION}"

case "${1:-}" in
  build)
    go_install_cached "$KEY" helm "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" \
      "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"
    ;;
  path) [[ -x "$CACHE_ROOT/$KEY/bin/helm" ]] && echo "$CACHE_ROOT/$KEY/bin/helm" || exit 1 ;;
  *) echo "usage: $0 build|path" >&2; exit 2 ;;
esac
