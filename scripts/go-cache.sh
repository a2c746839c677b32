# Sourced by scripts/helm.sh and scripts/kueue.sh: one Go tool built from Go modules into the shared cache.
#
# The module and build caches are those of the control-plane build (scripts/k8s-testenv.sh) under
# ${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s, so a tool shares what that build compiled; each binary
# lands in <cache>/<key>/bin, keyed by version, and never in the repository. Nothing is downloaded as a binary.

CACHE_ROOT=${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s

go_env() {
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/gocache" GOPATH="$CACHE_ROOT/gopath"
  export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
}

# go_install_cached KEY NAME PACKAGE@VERSION LDFLAGS: build NAME once into $CACHE_ROOT/KEY/bin (under a lock, so
# two shells never build it twice) and print its path.
go_install_cached() {
  local key=$1 name=$2 pkg=$3 ldflags=$4
  local bin="$CACHE_ROOT/$key/bin" src="$CACHE_ROOT/$key/src"
  if [[ -x "$bin/$name" ]]; then
    echo "$bin/$name"
    return 0
  fi
  command -v go >/dev/null || { log "go toolchain not found"; exit 1; }
  go_env
  mkdir -p "$bin" "$src"
  exec 9>"$CACHE_ROOT/$key/build.lock"
  flock 9
  if [[ ! -x "$bin/$name" ]]; then
    log "building $pkg"
    local t0=$SECONDS
    GOBIN="$src/gobin" go install -p "${GPUSCHED_GO_P:-2}" -trimpath -ldflags "$ldflags" "$pkg"
    mv "$src/gobin/$name" "$bin/$name"
    log "built $name in $((SECONDS - t0)) s"
  fi
  echo "$bin/$name"
}
