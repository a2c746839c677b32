#!/usr/bin/env bash
# Helm, compiled from Go modules into the cache, for rendering deploy/helm/jupyter-gpusched in tests.
#
#   scripts/helm.sh build     build the pinned helm binary into the cache (idempotent); prints its path
#   scripts/helm.sh path      print the binary's path (exit 1 if it is not built)
#
# Like scripts/k8s-testenv.sh: nothing is downloaded as a binary; the module cache and build cache are shared
# with the k8s build under ${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s, the binary is keyed by version,
# and no binary is ever written into the repository.
set -euo pipefail

HELM_VERSION=${GPUSCHED_HELM_VERSION:-v4.3.2}   # helm.sh/helm/v4 release

CACHE_ROOT=${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s
KEY="helm-${HELM_VERSION}"
BIN="$CACHE_ROOT/$KEY/bin"
SRC="$CACHE_ROOT/$KEY/src"

log() { printf '[helm] %s\n' "$*" >&2; }

go_env() {
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/gocache" GOPATH="$CACHE_ROOT/gopath"
  export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
}

cmd_build() {
  if [[ -x "$BIN/helm" ]]; then
    echo "$BIN/helm"
    return 0
  fi
  command -v go >/dev/null || { log "go toolchain not found"; exit 1; }
  go_env
  mkdir -p "$BIN" "$SRC"
  exec 9>"$CACHE_ROOT/$KEY/build.lock"
  flock 9   # one build at a time, even from two shells
  if [[ ! -x "$BIN/helm" ]]; then
    log "building helm $HELM_VERSION"
    local t0=$SECONDS
    local pkg="helm.sh/helm/v4/internal/version"
    GOBIN="$SRC/gobin" go install -p "${GPUSCHED_GO_P:-2}" -trimpath \
      -ldflags "-s -w -X $pkg.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
    mv "$SRC/gobin/helm" "$BIN/helm"
    log "built helm in $((SECONDS - t0)) s: $("$BIN/helm" version --short 2>/dev/null || true)"
  fi
  echo "$BIN/helm"
}

case "${1:-}" in
  build) cmd_build ;;
  path) [[ -x "$BIN/helm" ]] && echo "$BIN/helm" || exit 1 ;;
  *) echo "usage: $0 build|path" >&2; exit 2 ;;
esac
