"""A real Kubernetes control plane with simulated GPU nodes, for tests and the benchmark.

`scripts/k8s-testenv.sh` (in the source tree) builds and starts etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok; kwok plays the kubelets of fake GPU nodes (deploy/kwok has its stages) and ends each
pod after the job's `sim_duration` parameter (`simulate`). Also for developer clusters: `fake_gpu_node`."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..backends.kubernetes import MANAGED_BY, MANAGER, Api, KubeApiError, KubernetesBackend, KubernetesConfig
from ..core import JobSpec, Pool, Tenant
from ..service import Service
from .notebooks import make_notebook
from .service import run_until as run_service_until
from .service import service_in
from .waits import wait_until

TESTENV = Path(__file__).resolve().parents[2] / "scripts" / "k8s-testenv.sh"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
SIM_IMAGE = "registry.example/gpusched-sim:1"  # never pulled: kwok runs no containers
GPUS_PER_NODE = 8
# The test cluster: two on-demand nodes and one spot node of 8 GPUs each, in these two pools.
NODES = (("od-1", "on-demand", False), ("od-2", "on-demand", False), ("spot-1", "spot", True))
POOLS = (Pool("on-demand", price_per_gpu_hour=2.0), Pool("spot", spot=True, price_per_gpu_hour=0.7))


# --- nodes ------------------------------------------------------------------------------------------------
def fake_gpu_node(
    name: str,
    pool: str,
    gpus: int = GPUS_PER_NODE,
    *,
    spot: bool = False,
    cfg: KubernetesConfig | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Iterable[Mapping[str, str]] = (),
    extra_resources: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """A Node that kwok (annotation `kwok.x-k8s.io/node: fake`) keeps Ready with `gpus` nvidia.com/gpu, and
    optionally more `labels` (GPU feature discovery's), `taints` and `extra_resources` (e.g. MIG slices)."""
    cfg = cfg or KubernetesConfig()
    resources: dict[str, str] = {
        "cpu": "64",
        "memory": "512Gi",
        "pods": "110",
        cfg.gpu_resource: str(gpus),
        **{k: str(v) for k, v in (extra_resources or {}).items()},
    }
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {cfg.pool_label: pool, "kubernetes.io/hostname": name, "type": "kwok", **(labels or {})},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }
    node_taints = [dict(t) for t in taints]
    if spot:
        node_taints.append({"key": cfg.spot_taint, "value": "true", "effect": "NoSchedule"})
    if node_taints:
        node["spec"]["taints"] = node_taints
    return node


def add_node(api: Api, name: str, pool: str, gpus: int = GPUS_PER_NODE, *, spot: bool = False, **kw: Any) -> None:
    """Create a fake GPU node (an existing one is kept) and give it its capacity (`kw`: see `fake_gpu_node`)."""
    node = fake_gpu_node(name, pool, gpus, spot=spot, **kw)
    try:
        api.request("POST", "/api/v1/nodes", body=node)
    except KubeApiError as exc:
        if exc.status != 409:
            raise
    # The API server keeps a created Node's status; make sure capacity is there before kwok takes it.
    api.request(
        "PATCH",
        f"/api/v1/nodes/{name}/status",
        body={"status": node["status"]},
        content_type="application/merge-patch+json",
    )


def ready_nodes(api: Api) -> set[str]:
    """Names of the nodes that are Ready and carry no node.kubernetes.io/* taint (not-ready, unreachable...)."""
    return {
        n["metadata"]["name"]
        for n in api.request("GET", "/api/v1/nodes")["items"]
        if any(c["type"] == "Ready" and c["status"] == "True" for c in (n.get("status") or {}).get("conditions") or ())
        and not any(t["key"].startswith("node.kubernetes.io/") for t in (n.get("spec") or {}).get("taints") or ())
    }


def ensure_namespace(api: Api, name: str, account_timeout: float = 10.0) -> str:
    """Create namespace `name` (an existing one is kept) with its default ServiceAccount, which pods need."""
    try:
        api.request(
            "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
    except KubeApiError as exc:
        if exc.status != 409:
            raise
    # The controller manager creates the ServiceAccount, but after the API-server outage test its namespace watch
    # may sit in back-off for a while, so after a short wait we create it ourselves (as an admin could).
    deadline = time.monotonic() + account_timeout
    while True:
        try:
            api.request("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")
            return name
        except KubeApiError as exc:
            if time.monotonic() > deadline:
                if exc.status != 404:
                    raise
                break
            time.sleep(0.2)
    try:
        api.request(
            "POST",
            f"/api/v1/namespaces/{name}/serviceaccounts",
            body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}},
        )
    except KubeApiError as exc:
        if exc.status != 409:  # the controller got there first
            raise
    return name


# --- the control plane ----------------------------------------------------------------------------------------
def testenv_bindir() -> Path | None:
    """Where `scripts/k8s-testenv.sh build` puts the binaries (cached outside the repo), or None."""
    try:
        out = subprocess.run(
            ["bash", str(TESTENV), "bindir"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out) if out else None


def control_plane_built() -> bool:
    d = testenv_bindir()
    return d is not None and all(os.access(d / b, os.X_OK) for b in BINARIES)


class KwokCluster:
    """A control plane of its own in `folder` (`start`, `stop`), and what the tests ask of it."""

    __test__ = False  # a helper, not a test class (test files import it as TestCluster)

    def __init__(self, folder: Path):
        self.dir = folder
        self.kubeconfig = folder / "kubeconfig"
        self.api: Api | None = None

    def _client(self) -> Api:
        assert self.api is not None, "start() the cluster first"
        return self.api

    def script(self, *args: str, timeout: float = 300) -> None:
        subprocess.run(["bash", str(TESTENV), *args, str(self.dir)], check=True, timeout=timeout)

    def start(self) -> None:
        self.script("start")
        self.api = Api(KubernetesConfig(kubeconfig=str(self.kubeconfig)))

    def add_node(self, name: str, pool: str, spot: bool = False, gpus: int = GPUS_PER_NODE, **kw: Any) -> None:
        add_node(self._client(), name, pool, gpus, spot=spot, **kw)

    def delete_node(self, name: str) -> None:
        self._client().request("DELETE", f"/api/v1/nodes/{name}")

    def wait_ready(self, names: Iterable[str], timeout: float = 60.0) -> None:
        wanted = set(names)
        wait_until(
            lambda: wanted <= ready_nodes(self._client()), timeout, lambda: f"nodes {sorted(wanted)} to be ready", 0.2
        )

    def namespace(self, name: str) -> str:
        return ensure_namespace(self._client(), name)

    def jobs(self, ns: str) -> list[dict]:
        return self._client().request(
            "GET", f"/apis/batch/v1/namespaces/{ns}/jobs", query={"labelSelector": f"{MANAGED_BY}={MANAGER}"}
        )["items"]

    def pods(self, ns: str | None = None) -> list[dict]:
        path = f"/api/v1/namespaces/{ns}/pods" if ns else "/api/v1/pods"
        return self._client().request("GET", path, query={"labelSelector": f"{MANAGED_BY}={MANAGER}"})["items"]

    def gpus_in_use(self) -> dict[str, int]:
        """Per node: GPUs of pods that hold them (bound, not finished) — what the kubelet would be running."""
        used: Counter[str] = Counter()
        for p in self.pods():
            node = (p.get("spec") or {}).get("nodeName")
            if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for c in p["spec"]["containers"]:
                used[node] += int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
        return dict(used)


@contextmanager
def running_cluster(folder: Path) -> Iterator[KwokCluster]:
    """A started test cluster with the NODES, stopped afterwards (a test module's fixture)."""
    c = KwokCluster(folder)
    c.start()
    try:
        for name, pool, spot in NODES:
            c.add_node(name, pool, spot)
        c.wait_ready([n for n, _, _ in NODES])
        yield c
    finally:
        if c.api is not None:
            c.api.close()
        c.script("stop", timeout=120)


def pod_prints(cluster: KwokCluster, *texts: str) -> None:
    """Every pod "prints" these lines: kwok serves this CRI-format file as each container's log."""
    with open(cluster.dir / "pod-logs" / "container.log", "a", encoding="utf-8") as f:
        for text in texts:
            ns = time.time_ns()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"
            f.write(f"{stamp} stdout F {text}\n")


# --- the service on it ----------------------------------------------------------------------------------------
def simulate(job: dict, spec: JobSpec, params) -> None:
    """The pod customizer: the kwok stages end a pod after the job's `sim_duration`, failing it if `sim_fail`."""
    ann = job["spec"]["template"]["metadata"]["annotations"]
    ann["gpusched.io/sim-duration"] = f"{float(params.get('sim_duration', 1.0))}s"
    if params.get("sim_fail"):
        ann["gpusched.io/sim-outcome"] = "fail"


def backend_config(cluster: KwokCluster, ns: str, **kw: Any) -> KubernetesConfig:
    """The backend's settings for namespace `ns` of the test cluster: quick heartbeats, retries and time-outs."""
    base: dict[str, Any] = dict(
        kubeconfig=str(cluster.kubeconfig),
        namespace=ns,
        instance=ns,
        image=SIM_IMAGE,
        pool_label="gpusched.io/pool",
        heartbeat_interval=1.0,
        max_backoff=1.0,
        request_timeout=5.0,
        watch_timeout=60,
    )
    base.update(kw)
    return KubernetesConfig(**base)


def make_service(
    folder: Path,
    cluster: KwokCluster,
    ns: str,
    tenants: Iterable[Tenant] = (),
    backend: KubernetesBackend | None = None,
    **cfg: Any,
) -> Service:
    """The live service on namespace `ns` of the test cluster, in the pools POOLS, with a notebook sim.ipynb
    (parameter sim_duration); `cfg`: backend settings (see `backend_config`)."""
    make_notebook(folder / "root" / "sim.ipynb", "print('simulated')", parameters="sim_duration = 1")
    backend = backend or KubernetesBackend(backend_config(cluster, ns, **cfg), pod_customizer=simulate)
    return service_in(folder, backend, tenants=tuple(tenants), pools=POOLS, memory_check_interval=3600.0)


def run_until(
    service: Service,
    predicate: Callable[[], Any],
    timeout: float = 90.0,
    cluster: KwokCluster | None = None,
    what: str = "",
) -> float:
    """Tick the service until `predicate()`; check after every tick that the core never hands out more GPUs
    than exist and, with `cluster`, every second that no node runs more GPUs than it has. Returns the longest
    tick (s)."""
    next_check = 0.0

    def invariants() -> None:
        nonlocal next_check
        c = service.scheduler.cluster
        assert 0 <= c.free_gpus <= c.total_gpus
        if cluster is not None and time.monotonic() >= next_check:
            next_check = time.monotonic() + 1.0
            for node, used in cluster.gpus_in_use().items():
                assert used <= GPUS_PER_NODE, f"{node} runs pods holding {used} GPUs"

    return run_service_until(service, predicate, timeout, what, interval=0.05, after_tick=invariants)
