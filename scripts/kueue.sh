#!/usr/bin/env bash
# Kueue, compiled from Go modules into the cache, for the Kueue admission mode's test and the side-by-side bench.
#
#   scripts/kueue.sh build    build the pinned kueue manager into the cache (idempotent); prints its path
#   scripts/kueue.sh path     print the binary's path (exit 1 if it is not built)
#   scripts/kueue.sh crds     print the folder holding the release's CRDs (from the module source)
#
# Like scripts/helm.sh: nothing is downloaded as a binary; the module and build caches are shared with the k8s
# build under ${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s and the binary is keyed by version. A cold
# build takes about 40 minutes on 2 cores, so CI does not build it: the Kueue tests run where this cache is warm.
# v0.15.x is the line built against the Kubernetes 1.34 libraries, the test control plane's version.
set -euo pipefail

KUEUE_VERSION=${GPUSCHED_KUEUE_VERSION:-v0.15.2}

CACHE_ROOT=${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s
KEY="kueue-${KUEUE_VERSION}"
BIN="$CACHE_ROOT/$KEY/bin"
SRC="$CACHE_ROOT/$KEY/src"

log() { printf '[kueue] %s\n' "$*" >&2; }

go_env() {
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/gocache" GOPATH="$CACHE_ROOT/gopath"
  export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
}

module_dir() {
  go_env
  go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/.*"Dir": "\(.*\)",*/\1/p'
}

cmd_build() {
  if [[ -x "$BIN/kueue" ]]; then
    echo "$BIN/kueue"
    return 0
  fi
  command -v go >/dev/null || { log "go toolchain not found"; exit 1; }
  go_env
  mkdir -p "$BIN" "$SRC"
  exec 9>"$CACHE_ROOT/$KEY/build.lock"
  flock 9   # one build at a time, even from two shells
  if [[ ! -x "$BIN/kueue" ]]; then
    log "building kueue $KUEUE_VERSION"
    local t0=$SECONDS
    GOBIN="$SRC/gobin" go install -p "${GPUSCHED_GO_P:-2}" -trimpath -ldflags "-s -w" \
      "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION"
    mv "$SRC/gobin/kueue" "$BIN/kueue"
    log "built kueue in $((SECONDS - t0)) s"
  fi
  echo "$BIN/kueue"
}

case "${1:-}" in
  build) cmd_build ;;
  path) [[ -x "$BIN/kueue" ]] && echo "$BIN/kueue" || exit 1 ;;
  crds) echo "$(module_dir)/config/components/crd/bases" ;;
  *) echo "usage: $0 build|path|crds" >&2; exit 2 ;;
esac
