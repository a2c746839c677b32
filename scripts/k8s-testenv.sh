#!/usr/bin/env bash
# A real Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) with kwok
# simulating GPU nodes, for the kubernetes backend's tests and benchmark. See docs/kubernetes.md.
#
#   scripts/k8s-testenv.sh build            build the pinned binaries from Go modules into the cache (idempotent)
#   scripts/k8s-testenv.sh start [DIR]      start a cluster; DIR holds its state (default: $CACHE/run/default)
#   scripts/k8s-testenv.sh stop [DIR]       stop it and remove DIR
#   scripts/k8s-testenv.sh env [DIR]        print KUBECONFIG=... for a started cluster
#   scripts/k8s-testenv.sh apiserver stop|start [DIR]   stop / restart only the API server (outage tests)
#   scripts/k8s-testenv.sh bindir           print the folder holding the binaries
#
# With GPUSCHED_K8S_AUDIT=1 at `start`, the API server writes an audit log (DIR/logs/audit.log, one JSON event per
# line at level Metadata, with each request's userAgent; node leases and node status updates, the fake kubelets'
# heartbeats, are left out): benchmarks/k8s_scale.py counts the backend's requests in it.
#
# Nothing is downloaded as a binary: everything is compiled with the local Go toolchain from the module proxy.
# Binaries, module cache and build cache live under ${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s, keyed
# by version, so a warm machine rebuilds nothing. No binary is ever written into the repository.
set -euo pipefail

K8S_VERSION=${GPUSCHED_K8S_VERSION:-v1.34.4}   # k8s.io/kubernetes release
ETCD_VERSION=${GPUSCHED_ETCD_VERSION:-v3.6.4}  # the etcd that release pins in its go.mod
KWOK_VERSION=${GPUSCHED_KWOK_VERSION:-v0.8.0}  # last kwok release that builds with Go 1.26

CACHE_ROOT=${GPUSCHED_CACHE:-$HOME/.cache/jupyter-gpusched}/k8s
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
BIN="$CACHE_ROOT/$KEY/bin"
SRC="$CACHE_ROOT/$KEY/src"
REPO=$(cd "$(dirname "$0")/.." && pwd)
BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok kwokctl)

STAGING=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider cluster-bootstrap
  code-generator component-base component-helpers controller-manager cri-api cri-client csi-translation-lib
  dynamic-resource-allocation endpointslice externaljwt kms kube-aggregator kube-controller-manager kube-proxy
  kube-scheduler kubectl kubelet metrics mount-utils pod-security-admission sample-apiserver sample-cli-plugin
  sample-controller cri-streaming streaming)

log() { printf '[k8s-testenv] %s\n' "$*" >&2; }

go_env() {
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/gocache" GOPATH="$CACHE_ROOT/gopath"
  export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  export GOPROXY=${GOPROXY:-https://proxy.golang.org,direct}
}

have_all() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

build_k8s() {
  local minor patch mod="$SRC/kubernetes" name
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  patch=$(echo "$K8S_VERSION" | cut -d. -f3)
  local staging_version="v0.${minor}.${patch}"
  mkdir -p "$mod"
  {
    echo "module gpusched.local/k8sbuild"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    for name in "${STAGING[@]}"; do
      # cri-streaming/streaming only exist from 1.36; a replace for a module nothing requires is harmless.
      echo "	k8s.io/$name => k8s.io/$name $staging_version"
    done
    echo ")"
  } > "$mod/go.mod.new"
  if ! cmp -s "$mod/go.mod.new" "$mod/go.mod.gen" 2>/dev/null; then
    cp "$mod/go.mod.new" "$mod/go.mod"; cp "$mod/go.mod.new" "$mod/go.mod.gen"; rm -f "$mod/go.sum"
  fi
  local pkg="k8s.io/component-base/version"
  local ldflags="-s -w -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
  for name in kube-apiserver kube-controller-manager kube-scheduler; do
    [[ -x "$BIN/$name" ]] && continue
    log "building $name $K8S_VERSION"
    local t0=$SECONDS
    (cd "$mod" && go build -p "${GPUSCHED_GO_P:-2}" -trimpath -ldflags "$ldflags" -o "$BIN/$name.tmp" \
      "k8s.io/kubernetes/cmd/$name")
    mv "$BIN/$name.tmp" "$BIN/$name"
    log "built $name in $((SECONDS - t0)) s: $("$BIN/$name" --version)"
  done
}

build_etcd() {
  [[ -x "$BIN/etcd" ]] && return 0
  local mod="$SRC/etcd"
  mkdir -p "$mod"
  cat > "$mod/go.mod" <<EOF
module gpusched.local/etcdbuild

go 1.23.0

require (
	go.etcd.io/etcd/server/v3 $ETCD_VERSION
	go.etcd.io/etcd/api/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/pkg/v3 $ETCD_VERSION
	go.etcd.io/etcd/client/v3 $ETCD_VERSION
	go.etcd.io/etcd/pkg/v3 $ETCD_VERSION
)
EOF
  log "building etcd $ETCD_VERSION"
  local t0=$SECONDS
  (cd "$mod" && go build -p "${GPUSCHED_GO_P:-2}" -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  log "built etcd in $((SECONDS - t0)) s: $("$BIN/etcd" --version | head -1)"
}

build_kwok() {
  local name
  for name in kwok kwokctl; do
    [[ -x "$BIN/$name" ]] && continue
    log "building $name $KWOK_VERSION"
    local t0=$SECONDS
    GOBIN="$SRC/gobin" GOFLAGS="-buildvcs=false" go install -p "${GPUSCHED_GO_P:-2}" -trimpath \
      -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/$name@$KWOK_VERSION"
    mv "$SRC/gobin/$name" "$BIN/$name"
    log "built $name in $((SECONDS - t0)) s"
  done
}

cmd_build() {
  if have_all; then
    log "binaries present in $BIN"
    return 0
  fi
  command -v go >/dev/null || { log "go toolchain not found"; exit 1; }
  go_env
  mkdir -p "$BIN" "$SRC"
  exec 9>"$CACHE_ROOT/$KEY/build.lock"
  flock 9   # one build at a time, even from two shells
  local t0=$SECONDS
  build_kwok
  build_etcd
  build_k8s
  log "all binaries built in $((SECONDS - t0)) s into $BIN"
}

# --- cluster lifecycle ------------------------------------------------------------------------------------------
# The cluster is run as plain processes (no kwokctl): etcd, kube-apiserver, kube-controller-manager (the Job
# controller, PodGC, node lifecycle), kube-scheduler and kwok (fake kubelets for nodes annotated
# kwok.x-k8s.io/node=fake, which also serves their kubelet API: `kubectl logs` of any pod reads the CRI-format
# file DIR/pod-logs/container.log, see deploy/kwok/logs.yaml). Each has a pid file and a log in DIR; the API server can be stopped and started
# alone (`apiserver-stop` / `apiserver-start`) to test outages. Clients authenticate with an admin client
# certificate (group system:masters) from DIR/kubeconfig.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

default_dir() { echo "$CACHE_ROOT/run/default"; }

pki() {
  local d="$1/pki"
  mkdir -p "$d"
  (
    cd "$d"
    openssl genrsa -out ca.key 2048 2>/dev/null
    openssl req -x509 -new -key ca.key -days 3650 -subj "/CN=gpusched-testenv-ca" -out ca.crt 2>/dev/null
    openssl genrsa -out apiserver.key 2048 2>/dev/null
    openssl req -new -key apiserver.key -subj "/CN=kube-apiserver" -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,IP:10.96.0.1\nextendedKeyUsage=serverAuth\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile apiserver.ext \
      -out apiserver.crt 2>/dev/null
    openssl genrsa -out admin.key 2048 2>/dev/null
    openssl req -new -key admin.key -subj "/O=system:masters/CN=admin" -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth,serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' > admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile admin.ext \
      -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}

write_kubeconfig() {
  local dir="$1" port="$2"
  cat > "$dir/kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: gpusched-testenv
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $dir/pki/admin.crt
    client-key: $dir/pki/admin.key
contexts:
- name: gpusched-testenv
  context: {cluster: gpusched-testenv, user: admin, namespace: default}
current-context: gpusched-testenv
KCFG
}

# launch NAME DIR CMD... : start one component in its own session, log and pid in DIR
launch() {
  local name="$1" dir="$2"
  shift 2
  printf '%q ' "$@" > "$dir/cmd/$name"
  setsid "$@" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name"
}

relaunch() {  # start a component again with the command line it was first started with
  local name="$1" dir="$2"
  setsid bash -c "exec $(cat "$dir/cmd/$name")" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$name"
}

alive() { local p; p=$(cat "$2/pids/$1" 2>/dev/null) && kill -0 "$p" 2>/dev/null; }

stop_component() {
  local name="$1" dir="$2" pid i
  pid=$(cat "$dir/pids/$name" 2>/dev/null) || return 0
  kill -TERM "$pid" 2>/dev/null || { rm -f "$dir/pids/$name"; return 0; }
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$dir/pids/$name"
}

api() {  # api DIR PATH: GET from the API server with the admin certificate
  local dir="$1"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  curl -sf --max-time 5 --cacert "$dir/pki/ca.crt" --cert "$dir/pki/admin.crt" --key "$dir/pki/admin.key" \
    "https://127.0.0.1:$APISERVER_PORT$2"
}

wait_for() {  # wait_for SECONDS WHAT CMD...
  local limit="$1" what="$2" t0=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - t0 > limit)); then log "timed out after ${limit}s waiting for $what"; return 1; fi
    sleep 0.2
  done
}

audit_args() {  # the API server's audit flags, with GPUSCHED_K8S_AUDIT=1 (see the top)
  local dir="$1"
  [[ "${GPUSCHED_K8S_AUDIT:-}" == 1 ]] || return 0
  cat > "$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: coordination.k8s.io, resources: [leases]}]
- level: None
  resources: [{group: "", resources: [nodes/status]}]
- level: Metadata
POLICY
  printf '%s\n' --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/logs/audit.log" \
    --audit-log-mode=batch --audit-log-maxsize=0
}

start_apiserver() {
  local dir="$1"
  . "$dir/cluster.env"
  local -a audit
  mapfile -t audit < <(audit_args "$dir")
  launch kube-apiserver "$dir" "$BIN/kube-apiserver" "${audit[@]}" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
    --client-ca-file="$dir/pki/ca.crt" \
    --service-account-key-file="$dir/pki/sa.pub" --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/12 --authorization-mode=RBAC --allow-privileged=true \
    --enable-priority-and-fairness=false --max-requests-inflight=0 --max-mutating-requests-inflight=0 \
    --endpoint-reconciler-type=none --watch-cache=true \
    --kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$dir/pki/ca.crt" \
    --kubelet-client-certificate="$dir/pki/admin.crt" --kubelet-client-key="$dir/pki/admin.key" --v=0
}

# The container log kwok serves for every pod (deploy/kwok/logs.yaml): CRI format, seeded with papermill-like
# lines timed at cluster start. Tests append to it.
seed_pod_log() {
  local f="$1/pod-logs/container.log" now
  mkdir -p "$1/pod-logs"
  now=$(date -u +%Y-%m-%dT%H:%M:%S)
  {
    echo "$now.000000001Z stderr F Input Notebook:  /gpusched/input/notebook.ipynb"
    echo "$now.000000002Z stderr F Output Notebook: /gpusched/output/output.ipynb"
    echo "$now.000000003Z stderr F Executing notebook with kernel: python3"
    echo "$now.000000004Z stderr F Executing Cell 1---------------------------------------"
    echo "$now.000000005Z stdout F simulated"
    echo "$now.000000006Z stderr F Ending Cell 1------------------------------------------"
  } > "$f"
  sed "s|POD_LOG_FILE|$f|" "$REPO/deploy/kwok/logs.yaml" > "$1/kwok-logs.yaml"
}

cmd_start() {
  local dir="${1:-$(default_dir)}"
  have_all || { log "binaries missing: run '$0 build' first"; exit 1; }
  if [[ -f "$dir/cluster.env" ]] && alive kube-apiserver "$dir"; then
    log "a cluster is already running in $dir"
    echo "KUBECONFIG=$dir/kubeconfig"
    return 0
  fi
  rm -rf "$dir"
  mkdir -p "$dir/logs" "$dir/pids" "$dir/cmd" "$dir/etcd"
  touch "$dir/.gpusched-testenv"  # marks the folder as ours: `stop` only removes folders carrying it
  local t0=$SECONDS
  pki "$dir"
  local etcd_port peer_port api_port kcm_port sched_port kwok_port
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  kcm_port=$(free_port); sched_port=$(free_port); kwok_port=$(free_port)
  cat > "$dir/cluster.env" <<ENV
ETCD_PORT=$etcd_port
APISERVER_PORT=$api_port
KUBECONFIG=$dir/kubeconfig
POD_LOG=$dir/pod-logs/container.log
ENV
  write_kubeconfig "$dir" "$api_port"

  launch etcd "$dir" "$BIN/etcd" --name=node0 --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="node0=http://127.0.0.1:$peer_port" --auto-compaction-retention=1 \
    --quota-backend-bytes=8589934592 --unsafe-no-fsync=true --log-level=warn
  wait_for 60 etcd curl -sf "http://127.0.0.1:$etcd_port/health" || { cmd_stop "$dir"; exit 1; }

  start_apiserver "$dir"
  wait_for 120 kube-apiserver api "$dir" /readyz || { tail -20 "$dir/logs/kube-apiserver.log" >&2; cmd_stop "$dir"; exit 1; }

  launch kube-controller-manager "$dir" "$BIN/kube-controller-manager" --kubeconfig="$dir/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$kcm_port" \
    --service-account-private-key-file="$dir/pki/sa.key" --root-ca-file="$dir/pki/ca.crt" \
    --use-service-account-credentials=false --kube-api-qps=5000 --kube-api-burst=10000 \
    --concurrent-job-syncs=20 --v=0
  launch kube-scheduler "$dir" "$BIN/kube-scheduler" --kubeconfig="$dir/kubeconfig" \
    --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
    --leader-elect=false --bind-address=127.0.0.1 --secure-port="$sched_port" \
    --kube-api-qps=5000 --kube-api-burst=10000 --v=0
  # kwok is also the nodes' kubelet API (logs): HTTPS on 127.0.0.1:$kwok_port, which every fake node advertises as
  # its InternalIP and kubeletEndpoint port; it serves with the API server's certificate (SAN 127.0.0.1).
  seed_pod_log "$dir"
  launch kwok "$dir" "$BIN/kwok" --kubeconfig="$dir/kubeconfig" --config="$REPO/deploy/kwok/stages.yaml" \
    --config="$dir/kwok-logs.yaml" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=127.0.0.1 --node-port="$kwok_port" --cidr=10.0.0.1/16 --node-lease-duration-seconds=40 \
    --server-address="127.0.0.1:$kwok_port" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key"
  # Pods need the namespace's default ServiceAccount, which the controller manager creates.
  wait_for 120 "the default ServiceAccount" api "$dir" /api/v1/namespaces/default/serviceaccounts/default \
    || { tail -20 "$dir/logs/kube-controller-manager.log" >&2; cmd_stop "$dir"; exit 1; }
  local c
  for c in kube-controller-manager kube-scheduler kwok; do
    alive "$c" "$dir" || { log "$c exited:"; tail -20 "$dir/logs/$c.log" >&2; cmd_stop "$dir"; exit 1; }
  done
  log "cluster up in $((SECONDS - t0)) s: $("$BIN/kube-apiserver" --version), state in $dir"
  echo "KUBECONFIG=$dir/kubeconfig"
}

cmd_stop() {
  local dir="${1:-$(default_dir)}" c pid i
  [[ -d "$dir" ]] || return 0
  # TERM everything but etcd at once, give them 5 s, then stop etcd last.
  for c in kwok kube-scheduler kube-controller-manager kube-apiserver; do
    pid=$(cat "$dir/pids/$c" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null || true
  done
  for i in $(seq 1 50); do
    alive kwok "$dir" || alive kube-scheduler "$dir" || alive kube-controller-manager "$dir" || alive kube-apiserver "$dir" || break
    sleep 0.1
  done
  for c in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_component "$c" "$dir"; done
  if [[ -f "$dir/.gpusched-testenv" ]]; then rm -rf "$dir"; fi
  log "stopped the cluster in $dir"
}

cmd_env() {
  local dir="${1:-$(default_dir)}"
  [[ -f "$dir/cluster.env" ]] || { log "no cluster in $dir"; exit 1; }
  echo "KUBECONFIG=$dir/kubeconfig"
}

cmd_apiserver() {  # apiserver stop|start [DIR]
  local what="$1" dir="${2:-$(default_dir)}"
  case "$what" in
    stop) stop_component kube-apiserver "$dir"; log "kube-apiserver stopped" ;;
    start)
      alive kube-apiserver "$dir" || relaunch kube-apiserver "$dir"
      wait_for 120 kube-apiserver api "$dir" /readyz
      log "kube-apiserver ready" ;;
    *) log "usage: $0 apiserver stop|start [DIR]"; exit 2 ;;
  esac
}
case "${1:-}" in
  build) cmd_build ;;
  bindir) echo "$BIN" ;;
  start) shift; cmd_start "$@" ;;
  stop) shift; cmd_stop "$@" ;;
  env) shift; cmd_env "$@" ;;
  apiserver) shift; cmd_apiserver "$@" ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
