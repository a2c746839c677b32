"""The Kubernetes backend: each job is a `batch/v1` Job, created suspended, that the core admits.

How a job maps onto the cluster (docs/kubernetes.md has the operator's view):

- **Names.** A job's Job and ConfigMap are both called `job_name(job_id)`: `gpusched-<id>`, lower-cased and
  cut to a valid RFC 1123 label, with a hash of the id appended whenever the id had to be changed, so odd ids
  (and odd notebook names, which only appear in labels/annotations after sanitising) never clash.
- **Labels.** `app.kubernetes.io/managed-by=jupyter-gpusched`, `gpusched.io/instance` (which service owns it),
  `gpusched.io/job-id`, `gpusched.io/tenant`, `gpusched.io/priority`, `gpusched.io/notebook` on the Job and its
  pod template; the exact notebook path and owner are annotations.
- **Pod.** One container running the configured image with
  `papermill /gpusched/input/notebook.ipynb /gpusched/output/output.ipynb -f /gpusched/input/parameters.json`,
  `nvidia.com/gpu` in limits, `restartPolicy: Never`, `backoffLimit` = the job's `max_retries`,
  `activeDeadlineSeconds` = its `max_runtime`, and a pod failure policy that ignores disruptions (a pod lost
  with its node is not a failure of the notebook).
- **Notebook delivery.** The notebook and its parameters go in a ConfigMap (`notebook.ipynb`,
  `parameters.json`) owned by the Job, mounted read-only at `/gpusched/input`; so a notebook (with its outputs)
  must be under 1 MiB, which the API server itself enforces. `/gpusched/output` is an emptyDir unless
  `output_volume` names a volume (e.g. a PVC), mounted with the Job's name as subPath; notebooks that checkpoint
  write to `$GPUSCHED_CHECKPOINT_DIR` there and resume from it.
- **Admission** is one merge patch: node selector for the pool, node affinity to the node the core chose,
  tolerations for a spot node's taint, and `suspend: false`. **Preemption** sets `suspend: true` (the Job
  controller deletes the pod without counting a failure) and clears `status.startTime`, so the next admission
  may place it elsewhere. **Cancel** deletes the Job with background propagation (pods and ConfigMap go too).

Threads: all API I/O happens off the service's loop. Watchers (Jobs and Pods per namespace, Nodes) keep caches
from list + watch (resourceVersion tracked, bookmarks on, a re-list when the version has expired: 410 Gone);
a small pool of workers drives each job's Job towards what the service last asked (run on node N / suspended /
deleted) and retries API failures (connection refused, 409, 429, 5xx) with backoff. `poll()` only hands over
news the watchers found: started, succeeded/failed, `node_added` / `node_lost` (the cluster's GPU nodes are
the inventory), `preempted` (the Job vanished while the service was down), `lost` (deleted behind our back).
While the API server is unreachable the backend keeps the last state it saw, so running jobs keep their
heartbeats and nothing is requeued just because the control plane blinked.

Pod logs: one more thread copies each pod's container log (papermill's `--log-output`) into the job's log.txt,
every `log_interval` seconds while the pod runs and once more when it ends: `GET .../pods/NAME/log` with
`timestamps=true`, `sinceTime` (the second of the last line copied; lines up to the last one copied are
skipped by their full timestamp, so nothing is written twice) and `limitBytes` (a fetch that hits the limit
is followed at once by the next). A pod whose log cannot be read (container not started, pod gone, API
down) is simply tried later, with backoff; each new pod starts with a separator line naming its attempt.
"""

from __future__ import annotations

import calendar
import hashlib
import heapq
import itertools
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.model import Allocation, JobSpec, JobState, NodeSpec, Pool, Priority
from ..base import Backend, BackendError, BackendUpdate, LaunchRequest, log_path, validate_parameters

log = logging.getLogger(__name__)

GPU_RESOURCE = "nvidia.com/gpu"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyter-gpusched"
L_INSTANCE = "gpusched.io/instance"
L_JOB_ID = "gpusched.io/job-id"
L_TENANT = "gpusched.io/tenant"
L_PRIORITY = "gpusched.io/priority"
L_NOTEBOOK = "gpusched.io/notebook"
A_JOB_ID = "gpusched.io/job-id"
A_NOTEBOOK = "gpusched.io/notebook"
A_OWNER = "gpusched.io/owner"
A_TENANT = "gpusched.io/tenant"
A_ATTEMPT = "gpusched.io/attempt"
A_NODE = "gpusched.io/node"
CONFIGMAP_LIMIT = 1024 * 1024  # bytes: what etcd / the API server accept in one ConfigMap
INPUT_DIR = "/gpusched/input"
OUTPUT_DIR = "/gpusched/output"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# --- names -------------------------------------------------------------------------------------
def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def job_name(job_id: str, prefix: str = "gpusched") -> str:
    """The Job (and ConfigMap) name of a job: a valid RFC 1123 label (<= 63 characters) that depends only on
    the job id. An id that had to be changed to fit gets a hash of the original, so two ids never collide."""
    slug = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    name = f"{prefix}-{slug}" if slug else prefix
    if slug == job_id and len(name) <= 63:
        return name
    head = name[: 63 - 9].rstrip("-")
    return f"{head}-{_digest(job_id)}"


def label_value(text: str) -> str:
    """`text` as a valid label value (<= 63 chars of [A-Za-z0-9_.-], alphanumeric at both ends); changed
    values carry a hash of the original so distinct inputs stay distinct."""
    text = str(text)
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    head = slug[:54].rstrip("-_.")
    return f"{head}-{_digest(text)}" if head else _digest(text)


# --- settings ------------------------------------------------------------------------------------
@dataclass
class KubernetesConfig:
    """How the backend reaches the cluster and what its Jobs look like (see docs/kubernetes.md)."""

    kubeconfig: str = ""  # path; "" -> $KUBECONFIG or ~/.kube/config, or in-cluster when those are absent
    context: str = ""  # kubeconfig context; "" -> the current one
    in_cluster: bool = False  # use the pod's service account (the service runs inside the cluster)
    namespace: str = "default"
    tenant_namespaces: Mapping[str, str] = field(default_factory=dict)  # tenant -> namespace of its Jobs
    image: str = "quay.io/jupyter/scipy-notebook:latest"  # must contain papermill
    image_pull_policy: str = "IfNotPresent"
    command: tuple[str, ...] = ("papermill",)  # followed by input, output and parameter arguments
    pool_label: str = "gpusched.io/pool"  # node label whose value names the node's pool
    default_pool: str = "default"  # pool of GPU nodes without that label
    pools: tuple[str, ...] = ()  # only nodes of these pools are used; () -> every pool
    spot_pools: tuple[str, ...] = ()  # pools known to be spot (also: any pool whose nodes carry spot_taint)
    spot_taint: str = "gpusched.io/spot"  # taint key of spot nodes; Jobs placed there tolerate it
    gpu_product_label: str = "nvidia.com/gpu.product"  # GPU feature discovery's label: a pool's GPU type
    gpu_resource: str = GPU_RESOURCE
    instance: str = "default"  # label value that tells this service's Jobs from another's in the same namespace
    service_account: str = ""
    output_volume: Mapping[str, Any] | None = None  # a pod `volumes` entry (without name), e.g. a PVC
    container_resources: Mapping[str, Any] = field(default_factory=dict)  # extra requests/limits (cpu, memory)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    ttl_after_finished: int | None = 24 * 3600  # seconds finished Jobs are kept; None -> forever
    pin_nodes: bool = True  # pin each Job to the node the core chose (else: only to its pool)
    heartbeat_interval: float = 5.0  # seconds between heartbeats reported for running jobs
    workers: int = 4  # threads doing API writes
    watch_timeout: int = 300  # seconds a watch request stays open before it is renewed
    request_timeout: float = 10.0  # seconds for one API request
    max_backoff: float = 5.0  # seconds; the longest wait between retries of one job's API calls
    sync_timeout: float = 10.0  # seconds the constructor waits for the first list of nodes
    dry_run_on_submit: bool = True  # check each submission with a server-side dry run (2 API calls)
    copy_logs: bool = True  # copy each pod's container log into the job's log.txt (needs `pods/log` get)
    log_interval: float = 5.0  # seconds between log fetches of a running pod (and once more when it ends)
    log_limit_bytes: int = 256 * 1024  # limitBytes of one fetch
    log_max_bytes: int = 64 * 1024 * 1024  # per pod: past this much, the copy stops with a note

    def namespace_for(self, tenant: str) -> str:
        return self.tenant_namespaces.get(tenant, self.namespace)

    def namespaces(self) -> list[str]:
        return sorted({self.namespace, *self.tenant_namespaces.values()})


# --- manifests -------------------------------------------------------------------------------------
def build_manifests(
    job_id: str,
    spec: JobSpec,
    notebook_text: str,
    parameters: Mapping[str, Any],
    cfg: KubernetesConfig,
    *,
    kernel_name: str | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The suspended Job and its ConfigMap for one job, as plain dicts (what `manifest` prints)."""
    name = job_name(job_id)
    namespace = cfg.namespace_for(spec.tenant)
    notebook_label = label_value(Path(spec.notebook).stem or "notebook")
    labels = {
        MANAGED_BY: MANAGER,
        L_INSTANCE: label_value(cfg.instance),
        L_JOB_ID: label_value(job_id),
        L_TENANT: label_value(spec.tenant),
        L_PRIORITY: Priority.parse(spec.priority).label,
        L_NOTEBOOK: notebook_label,
    }
    annotations = {A_JOB_ID: job_id, A_NOTEBOOK: spec.notebook, A_OWNER: spec.owner, A_TENANT: spec.tenant}
    command = [
        *cfg.command,
        f"{INPUT_DIR}/notebook.ipynb",
        f"{OUTPUT_DIR}/output.ipynb",
        "-f",
        f"{INPUT_DIR}/parameters.json",
        "--log-output",
        "--no-progress-bar",
    ]
    if kernel_name:
        command += ["-k", kernel_name]
    limits: dict[str, Any] = {cfg.gpu_resource: str(int(spec.gpus))}
    resources: dict[str, Any] = {"limits": limits}
    for key, value in (cfg.container_resources or {}).items():
        if key in ("limits", "requests") and isinstance(value, Mapping):
            resources.setdefault(key, {}).update({k: str(v) for k, v in value.items()})
    output_volume = dict(cfg.output_volume) if cfg.output_volume else {"emptyDir": {}}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "notebook",
                "image": cfg.image,
                "imagePullPolicy": cfg.image_pull_policy,
                "command": command,
                "workingDir": OUTPUT_DIR,
                "env": [
                    {"name": "GPUSCHED_JOB_ID", "value": job_id},
                    {"name": "GPUSCHED_CHECKPOINT_DIR", "value": f"{OUTPUT_DIR}/checkpoints"},
                    {
                        "name": "GPUSCHED_ATTEMPT",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{A_ATTEMPT}']"}},
                    },
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                ],
                "resources": resources,
                "volumeMounts": [
                    {"name": "input", "mountPath": INPUT_DIR, "readOnly": True},
                    {"name": "output", "mountPath": OUTPUT_DIR, "subPath": name},
                ],
            }
        ],
        "volumes": [{"name": "input", "configMap": {"name": name}}, {"name": "output", **output_volume}],
    }
    if cfg.service_account:
        pod_spec["serviceAccountName"] = cfg.service_account
    job_spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": max(0, int(spec.max_retries)),
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        "template": {
            "metadata": {
                "labels": {**dict(cfg.pod_labels), **labels},
                "annotations": {**dict(cfg.pod_annotations), **annotations, A_ATTEMPT: "0"},
            },
            "spec": pod_spec,
        },
    }
    if spec.max_runtime is not None:
        job_spec["activeDeadlineSeconds"] = max(1, min(int(math.ceil(spec.max_runtime)), 2**53))
    if cfg.ttl_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = int(cfg.ttl_after_finished)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": job_spec,
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": {A_JOB_ID: job_id}},
        "data": {"notebook.ipynb": notebook_text, "parameters.json": json.dumps(dict(parameters), sort_keys=True)},
    }
    return job, configmap


def placement_patch(node: str | None, pool: str | None, spot: bool, attempt: int, cfg: KubernetesConfig) -> dict[str, Any]:
    """The admission patch: where the pod may run, and `suspend: false` (JSON merge patch)."""
    spec: dict[str, Any] = {
        "nodeSelector": {cfg.pool_label: pool} if pool is not None and pool != cfg.default_pool else None,
        "affinity": None,
        "tolerations": None,
    }
    if pool == cfg.default_pool and pool is not None:
        # Nodes without the pool label: keep them off labelled pools' nodes.
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": cfg.pool_label, "operator": "DoesNotExist"}]}]
                }
            }
        }
    if node and cfg.pin_nodes:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    if spot:
        spec["tolerations"] = [{"key": cfg.spot_taint, "operator": "Exists"}]
    return {
        "spec": {
            "suspend": False,
            "template": {"metadata": {"annotations": {A_ATTEMPT: str(attempt), A_NODE: node or ""}}, "spec": spec},
        }
    }


def manifest_yaml(docs: list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120)


# --- a fake GPU node for kwok (tests, benchmark, developer clusters) --------------------------------------
def fake_gpu_node(name: str, pool: str, gpus: int = 8, *, spot: bool = False, cfg: KubernetesConfig | None = None) -> dict[str, Any]:
    """A Node that kwok (annotation `kwok.x-k8s.io/node: fake`) keeps Ready with `gpus` nvidia.com/gpu."""
    cfg = cfg or KubernetesConfig()
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", cfg.gpu_resource: str(gpus)}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {cfg.pool_label: pool, "kubernetes.io/hostname": name, "type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }
    if spot:
        node["spec"]["taints"] = [{"key": cfg.spot_taint, "value": "true", "effect": "NoSchedule"}]
    return node


def _only(values: set[str | None]) -> str | None:
    """The one value all agree on, or None."""
    return next(iter(values)) if len(values) == 1 else None


# --- the API --------------------------------------------------------------------------------------------
class ApiError(Exception):
    """An API request that failed. `status` 0: no HTTP answer (connection refused, timeout)."""

    def __init__(self, status: int, message: str, reason: str = "", retry_after: float | None = None, body: Any = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.retry_after = retry_after
        self.body = body

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status in (409, 429) or self.status >= 500

    @property
    def gone(self) -> bool:
        return self.status == 410


def _status_message(data: Any, fallback: str) -> tuple[str, str]:
    if isinstance(data, Mapping):
        return str(data.get("message") or fallback), str(data.get("reason") or "")
    return fallback, ""


class Api:
    """A thin JSON client over the official client's ApiClient: dicts in, dicts out, no model objects
    (deserialising thousands of V1Job objects would cost more than the API server does)."""

    def __init__(self, cfg: KubernetesConfig, pool_size: int = 16):
        try:
            from kubernetes import client, config
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise BackendError("the kubernetes backend needs the 'kubernetes' package: pip install 'jupyter-gpusched[k8s]'") from exc
        c = client.Configuration()
        try:
            in_cluster = cfg.in_cluster or (
                not cfg.kubeconfig
                and "KUBECONFIG" not in os.environ
                and not Path("~/.kube/config").expanduser().exists()
                and "KUBERNETES_SERVICE_HOST" in os.environ
            )
            if in_cluster:
                config.load_incluster_config(client_configuration=c)
            else:
                config.load_kube_config(
                    config_file=cfg.kubeconfig or None, context=cfg.context or None, client_configuration=c
                )
        except Exception as exc:
            raise BackendError(f"cannot load the Kubernetes configuration: {exc}") from None
        c.retries = False  # we retry, with backoff, ourselves
        c.connection_pool_maxsize = pool_size
        self.host = c.host
        self.client = client.ApiClient(c)
        self.timeout = cfg.request_timeout

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
        timeout: float | tuple[float, float] | None = None,
        stream: bool = False,
    ) -> Any:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        q = [(k, v if not isinstance(v, bool) else str(v).lower()) for k, v in (query or {}).items() if v is not None]
        t = timeout if timeout is not None else (min(3.0, self.timeout), self.timeout)
        try:
            resp = self.client.call_api(
                path,
                method,
                query_params=q,
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=t,
            )
        except ApiException as exc:
            try:
                data = json.loads(exc.body) if exc.body else None
            except (TypeError, ValueError):
                data = None
            message, reason = _status_message(data, f"{exc.status} {exc.reason}")
            retry = None
            if exc.headers and exc.headers.get("Retry-After"):
                try:
                    retry = float(exc.headers["Retry-After"])
                except ValueError:
                    retry = None
            raise ApiError(int(exc.status or 0), message, reason, retry, data) from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            raise ApiError(0, f"cannot reach the Kubernetes API server at {self.host}: {type(exc).__name__}: {exc}") from None
        if stream:
            return resp
        try:
            return json.loads(resp.data) if resp.data else {}
        except ValueError as exc:
            raise ApiError(0, f"unreadable answer from the Kubernetes API server: {exc}") from None

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # pragma: no cover
            pass


def _iter_lines(resp) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while True:
            i = buf.find(b"\n")
            if i < 0:
                break
            line, buf = buf[:i], buf[i + 1 :]
            if line.strip():
                yield line
    if buf.strip():
        yield buf


class _Watcher(threading.Thread):
    """List + watch one kind of object; keeps going through API outages and expired versions."""

    def __init__(self, backend: KubernetesBackend, kind: str, path: str, selector: str | None):
        super().__init__(name=f"gpusched-k8s-watch-{kind}", daemon=True)
        self.backend = backend
        self.kind = kind
        self.path = path
        self.selector = selector
        self.synced = threading.Event()
        self.relists = 0
        self._resp = None

    def run(self) -> None:
        b = self.backend
        rv: str | None = None
        delay = 0.2
        while not b._stopping.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    delay = 0.2
                self._watch(rv)
                rv = self._rv
                delay = 0.2
            except _Relist:
                rv = None
            except ApiError as exc:
                if exc.gone:
                    rv = None
                    continue
                if b._stopping.is_set():
                    break
                b._api_failed(exc)
                b._stopping.wait(delay)
                delay = min(delay * 2, b.cfg.max_backoff)
            except Exception:  # a bug must not silently end the watch
                if b._stopping.is_set():
                    break
                log.exception("kubernetes %s watch failed; retrying", self.kind)
                b._stopping.wait(delay)
                delay = min(delay * 2, b.cfg.max_backoff)

    def _list(self) -> str:
        items: list[dict] = []
        cont = None
        while True:
            data = self.backend.api.request(
                "GET", self.path, query={"labelSelector": self.selector, "limit": 500, "continue": cont}
            )
            items.extend(data.get("items") or [])
            meta = data.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
                break
        self.relists += 1
        self.backend._relisted(self.kind, self.path, items)
        self.backend._api_ok()
        self.synced.set()
        return rv

    def _watch(self, rv: str) -> None:
        b = self.backend
        self._rv = rv
        timeout = b.cfg.watch_timeout
        resp = b.api.request(
            "GET",
            self.path,
            query={
                "labelSelector": self.selector,
                "watch": True,
                "resourceVersion": rv,
                "allowWatchBookmarks": True,
                "timeoutSeconds": timeout,
            },
            timeout=(3.0, timeout + 30.0),
            stream=True,
        )
        self._resp = resp
        b._api_ok()
        try:
            for line in _iter_lines(resp):
                if b._stopping.is_set():
                    return
                event = json.loads(line)
                etype, obj = event.get("type"), event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise _Relist()
                    raise ApiError(int(obj.get("code") or 0), str(obj.get("message") or "watch error"))
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if new_rv:
                    self._rv = new_rv
                if etype == "BOOKMARK":
                    continue
                b._event(self.kind, etype, obj)
        except ApiError:
            raise
        except _Relist:
            raise
        except Exception as exc:
            if b._stopping.is_set():
                return
            raise ApiError(0, f"watch of {self.kind} interrupted: {type(exc).__name__}: {exc}") from None
        finally:
            self._resp = None
            try:
                resp.release_conn()
            except Exception:
                pass

    def interrupt(self) -> None:
        resp = self._resp
        if resp is not None:
            for how in ("shutdown", "close"):
                try:
                    getattr(resp, how)()
                except Exception:
                    pass


class _Relist(Exception):
    pass


# --- per-job bookkeeping ----------------------------------------------------------------------------------
@dataclass
class _Tracked:
    job_id: str
    name: str
    namespace: str
    want: str  # "run" | "suspend" | "delete" | "done"
    node: str | None = None
    pool: str | None = None
    spot: bool = False
    attempt: int = 0
    manifests: tuple[dict, dict] | None = None  # to create the Job (None for adopted jobs)
    job_dir: Path | None = None
    adopted: bool = False
    seen: bool = False  # a Job for it was seen in the cluster since we track it
    started_attempt: int = -1
    last_beat: float = 0.0
    backoff: float = 0.0
    recreate: bool = False  # deleting a failed Job so it can be created afresh
    reported_final: bool = False


@dataclass
class _PodLog:
    """How far one pod's container log has been copied into its job's log.txt (the log thread's state)."""

    job_id: str
    namespace: str
    name: str
    container: str
    attempt: str
    created: str
    started: bool = False  # a container has started: the kubelet has a log to give
    final: bool = False  # the pod has ended or is going away: fetch until nothing is left, then done
    done: bool = False
    due: float = 0.0  # time.monotonic() of the next fetch
    since_ns: int = -1  # timestamp (ns since the epoch) of the last line copied
    at_since: int = 0  # lines copied that carry exactly that timestamp
    sec_bytes: int = 0  # bytes (as fetched) of the lines copied within that timestamp's second
    copied: int = 0  # bytes written
    header: bool = False  # the separator line was written
    failures: int = 0  # HTTP errors in a row (an unreachable API server is not counted)


_LOG_TS = re.compile(rb"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _log_timestamp(raw: bytes) -> int | None:
    """An RFC 3339 timestamp (as `timestamps=true` prefixes log lines) in ns since the epoch, or None."""
    m = _LOG_TS.match(raw)
    if m is None:
        return None
    y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
    try:
        secs = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    tz = m.group(8)
    if tz != b"Z":
        sign = 1 if tz[:1] == b"+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs * 1_000_000_000 + int((m.group(7) or b"0").ljust(9, b"0"))


def split_log_lines(
    data: bytes, since_ns: int, at_since: int, truncated: bool, sec_bytes: int = 0
) -> tuple[list[bytes], int, int, int]:
    """The new lines of a `timestamps=true` log fetch (without their timestamps), and the new (since_ns,
    at_since, sec_bytes): lines older than `since_ns`, and the first `at_since` lines stamped exactly
    `since_ns`, were copied before; `sec_bytes` counts the bytes of the copied lines within since_ns's second
    (what a fetch from that second sends again). With `truncated` (the fetch hit limitBytes) an unfinished
    last line is left for the next fetch, unless it is the only line (then it is kept, cut)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif truncated and len(lines) > 1:
        lines.pop()
    out: list[bytes] = []
    skip = at_since
    for line in lines:
        stamp, _, text = line.partition(b" ")
        ts = _log_timestamp(stamp)
        if ts is None:  # not a timestamped line: keep it, as part of the last second seen
            ts, text = max(since_ns, 0), line
        if ts < since_ns:
            continue
        if ts == since_ns and skip > 0:
            skip -= 1
            continue
        out.append(text)
        if ts // 1_000_000_000 != since_ns // 1_000_000_000:
            sec_bytes = 0
        sec_bytes += len(line) + 1
        if ts == since_ns:
            at_since += 1
        else:
            since_ns, at_since, skip = ts, 1, 0
    return out, since_ns, at_since, sec_bytes


def _cond_true(obj: Mapping, ctype: str) -> Mapping | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def _slim(obj: dict) -> None:
    """Drop what the caches never read (managedFields are most of a cached object's size)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if obj.get("kind") == "Node" or "images" in (obj.get("status") or {}):
        (obj.get("status") or {}).pop("images", None)


def _node_gpus(node: Mapping, resource: str) -> int:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    try:
        return int(str(value)) if value is not None else 0
    except ValueError:
        return 0


class KubernetesBackend(Backend):
    """Runs each job as a suspended-then-admitted `batch/v1` Job on a Kubernetes cluster."""

    name = "kubernetes"

    def __init__(
        self,
        config: KubernetesConfig | None = None,
        *,
        pod_customizer: Callable[[dict[str, Any], JobSpec, Mapping[str, Any]], None] | None = None,
        api: Api | None = None,
        start: bool = True,
    ):
        """`pod_customizer(job_manifest, spec, parameters)` may edit a Job before it is created (the tests
        and the benchmark set kwok's simulated run time from a parameter with it)."""
        self.cfg = config or KubernetesConfig()
        self.pod_customizer = pod_customizer
        self.api = api or Api(self.cfg, pool_size=self.cfg.workers + 2 * len(self.cfg.namespaces()) + 4)
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._stopping = threading.Event()
        self._tracked: dict[str, _Tracked] = {}
        self._jobs: dict[str, dict] = {}  # job id -> Job object (cache)
        self._pods: dict[str, dict[str, dict]] = {}  # job id -> pod name -> Pod
        self._nodes: dict[str, dict] = {}  # node name -> Node
        self._reported_nodes: dict[str, NodeSpec] = {}
        self._inventory_taken = False
        self._updates: list[BackendUpdate] = []
        self._queue: list[tuple[float, int, str]] = []
        self._queued: dict[str, float] = {}
        self._inflight: set[str] = set()
        self._seq = itertools.count()
        self._adoption: dict[str, tuple[JobState, Allocation]] | None = None  # job id -> (state, allocation)
        self._nodes_dirty = True
        self._adoption_done = False
        self.api_up = False
        self.api_error: str = ""
        self.api_down_since: float | None = None
        self.stats = {"creates": 0, "patches": 0, "deletes": 0, "retries": 0, "api_errors": 0}
        selector = f"{MANAGED_BY}={MANAGER},{L_INSTANCE}={label_value(self.cfg.instance)}"
        self._watchers: list[_Watcher] = [_Watcher(self, "node", "/api/v1/nodes", None)]
        for ns in self.cfg.namespaces():
            self._watchers.append(_Watcher(self, "job", f"/apis/batch/v1/namespaces/{ns}/jobs", selector))
            self._watchers.append(_Watcher(self, "pod", f"/api/v1/namespaces/{ns}/pods", selector))
        self._workers = [
            threading.Thread(target=self._work_loop, name=f"gpusched-k8s-worker-{i}", daemon=True)
            for i in range(max(1, self.cfg.workers))
        ]
        # Pod logs -> log.txt: pod uid -> progress (finished pods stay, done, until they leave the cache).
        self._podlogs: dict[str, _PodLog] = {}
        self._podlogs_active: set[str] = set()
        self._logs_wake = threading.Condition(self._lock)
        self._file_lock = threading.Lock()  # appends to log.txt (taken after self._lock, never before)
        if self.cfg.copy_logs:
            self._workers.append(threading.Thread(target=self._log_loop, name="gpusched-k8s-logs", daemon=True))
        self._started = False
        if start:
            self.start()

    # --- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None:
        if self._started:
            return
        self._started = True
        for t in self._watchers + self._workers:
            t.start()
        self._watchers[0].synced.wait(self.cfg.sync_timeout)
        if not self._watchers[0].synced.is_set():
            log.warning("the Kubernetes API server did not answer within %.0f s (%s); starting with no nodes", self.cfg.sync_timeout, self.api_error)

    def wait_synced(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        for w in self._watchers:
            if not w.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def close(self) -> None:
        """Stop watching and writing. The Jobs keep running in the cluster (as they would through a restart of
        the service); the next backend adopts them (`adopt`). `delete_all_jobs` removes them."""
        self._stopping.set()
        with self._lock:
            self._wake.notify_all()
            self._logs_wake.notify_all()
        for w in self._watchers:
            w.interrupt()
        for t in self._watchers + self._workers:
            if t.is_alive():
                t.join(timeout=5.0)
        self.api.close()

    def delete_all_jobs(self, timeout: float = 120.0) -> int:
        """Delete every Job (and ConfigMap) of this instance, waiting for nothing. For tests and teardown."""
        selector = f"{MANAGED_BY}={MANAGER},{L_INSTANCE}={label_value(self.cfg.instance)}"
        n = 0
        for ns in self.cfg.namespaces():
            for kind in ("/apis/batch/v1/namespaces/{ns}/jobs", "/api/v1/namespaces/{ns}/configmaps"):
                self.api.request(
                    "DELETE",
                    kind.format(ns=ns),
                    query={"labelSelector": selector, "propagationPolicy": "Background"},
                    timeout=(3.0, timeout),
                )
                n += 1
        return n

    # --- the protocol ---------------------------------------------------------------------------------
    def inventory(self) -> list[NodeSpec]:
        with self._lock:
            nodes = self._eligible_nodes()
            self._reported_nodes = dict(nodes)
            self._inventory_taken = True
            return [nodes[n] for n in sorted(nodes)]

    def pools(self) -> list[Pool]:
        """Pools seen on the cluster's GPU nodes; spot where configured so or where a node has the spot taint.
        A pool's GPU type is its nodes' `gpu_product_label` (set by NVIDIA's GPU feature discovery) where
        they all agree; otherwise none (configure it in c.GPUSched.pools)."""
        with self._lock:
            spot: dict[str, bool] = {}
            products: dict[str, set[str | None]] = {}
            for node in self._nodes.values():
                summary = self._summarise(node)
                if summary is not None:
                    pool, _, is_spot = summary
                    spot[pool] = spot.get(pool, False) or is_spot
                    labels = (node.get("metadata") or {}).get("labels") or {}
                    products.setdefault(pool, set()).add(labels.get(self.cfg.gpu_product_label))
        return [Pool(p, spot=s, gpu_type=_only(products[p])) for p, s in sorted(spot.items())]

    def launch(self, req: LaunchRequest) -> None:
        if self._stopping.is_set():
            raise BackendError("the kubernetes backend is closed")
        spec = req.spec or JobSpec(notebook=Path(req.notebook).name, gpus=max(1, len(req.gpu_ids)), max_runtime=req.max_runtime)
        allocation = tuple(req.allocation or ())
        if len(allocation) > 1:
            raise BackendError(
                f"job {req.job_id} was placed on {len(allocation)} nodes; the kubernetes backend runs a job's GPUs on one node"
            )
        try:
            params = validate_parameters(req.parameters)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        try:
            text = Path(req.notebook).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read the notebook {req.notebook}: {exc}") from None
        job, cm = build_manifests(req.job_id, spec, text, params, self.cfg, kernel_name=req.kernel_name)
        if self.pod_customizer is not None:
            self.pod_customizer(job, spec, params)
        node = allocation[0][0] if allocation else None
        with self._lock:
            pool, spot = self._placement_of(node)
            t = self._tracked.get(req.job_id)
            if t is None:
                t = self._tracked[req.job_id] = _Tracked(req.job_id, job["metadata"]["name"], job["metadata"]["namespace"], "run")
            t.want = "run"
            t.name, t.namespace = job["metadata"]["name"], job["metadata"]["namespace"]
            t.node, t.pool, t.spot = node, pool, spot
            t.attempt = max(t.attempt, self._observed_attempt(req.job_id)) + 1
            t.manifests = (job, cm)
            t.job_dir = Path(req.job_dir)
            t.reported_final = False
            t.backoff = 0.0
            self._enqueue(req.job_id, 0.0)
        self._note(t, f"admitted to {node or 'pool ' + str(pool)} (attempt {t.attempt}); Job {t.namespace}/{t.name}")

    def kill(self, job_id: str, reason: str) -> None:
        delete = reason.lower().startswith("cancel")
        with self._lock:
            t = self._tracked.get(job_id)
            if t is None:
                kj = self._jobs.get(job_id)
                if kj is None:
                    return
                meta = kj["metadata"]
                t = self._tracked[job_id] = _Tracked(job_id, meta["name"], meta["namespace"], "suspend")
            if t.want == "done" and not delete:
                return
            t.want = "delete" if delete else "suspend"
            t.backoff = 0.0
            self._enqueue(job_id, 0.0)
        self._note(t, f"{'deleting' if delete else 'suspending'} the Job ({reason or 'no reason given'})")

    def poll(self) -> list[BackendUpdate]:
        now = time.time()
        with self._lock:
            out: list[BackendUpdate] = []
            if self._inventory_taken and self._nodes_dirty:
                self._nodes_dirty = False
                out += self._node_updates(now)
            out += self._updates
            self._updates = []
            if out and log.isEnabledFor(logging.DEBUG):
                for u in out:
                    log.debug("update %s %s %s", u.job_id or (u.node.name if u.node else ""), u.kind, u.message)
            for t in self._tracked.values():
                if t.want == "run" and t.started_attempt == t.attempt and now - t.last_beat >= self.cfg.heartbeat_interval:
                    t.last_beat = now
                    out.append(BackendUpdate(t.job_id, "heartbeat", now))
            return out

    def running(self) -> set[str]:
        with self._lock:
            return {j for j, t in self._tracked.items() if t.want == "run"}

    def reap_orphan(self, job_dir: Path) -> bool:
        return False  # Jobs outlive the service by design: `adopt` takes them over instead

    def gpu_memory_used_mib(self) -> dict[tuple[str, int], float]:
        return {}

    def adopt(self, jobs: Mapping[str, tuple[JobState, Allocation]]) -> set[str]:
        """Reconcile after a restart. `jobs`: every job in the store -> (state, allocation). Active jobs are
        taken over as they are (they keep their GPUs); once the cluster has been listed, the backend resolves
        the differences: an active job with no Job is reported `preempted` (requeued without using a retry), a
        Job that finished while the service was down reports succeeded/failed, a Job of a queued job is
        suspended, of a finished or cancelled job deleted (unless finished), and a Job with no store row is
        deleted."""
        adopted: set[str] = set()
        with self._lock:
            self._adoption = {j: (s, a) for j, (s, a) in jobs.items()}
            self._adoption_done = False
            for job_id, (state, allocation) in jobs.items():
                if not state.holds_gpus:
                    continue
                node = allocation[0][0] if allocation else None
                pool, spot = self._placement_of(node)
                t = self._tracked.get(job_id) or _Tracked(job_id, job_name(job_id), "", "run")
                t.want, t.node, t.pool, t.spot, t.adopted = "run", node, pool, spot, True
                t.attempt = max(t.attempt, self._observed_attempt(job_id))
                if state is JobState.RUNNING:
                    # Believed running until the cluster says otherwise: it keeps its heartbeats even while
                    # the API server cannot be reached.
                    t.started_attempt, t.last_beat = t.attempt, time.time()
                self._tracked[job_id] = t
                adopted.add(job_id)
            self._maybe_finish_adoption()
        return adopted

    def check(self, spec: JobSpec, notebook: Path, parameters: Mapping[str, Any] | None = None) -> None:
        """Ask the API server (server-side dry run) whether it would accept this job's Job and ConfigMap.
        Raises BackendError with the API server's own message when it would not. Skipped (accepted) while the
        API server is unreachable: the job is then checked when it is created."""
        if not self.api_up or not self.cfg.dry_run_on_submit:
            return
        try:
            text = Path(notebook).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read the notebook {notebook}: {exc}") from None
        job, cm = build_manifests("dry-run-" + _digest(str(time.time_ns())), spec, text, dict(parameters or {}), self.cfg)
        if self.pod_customizer is not None:
            self.pod_customizer(job, spec, dict(parameters or {}))
        ns = job["metadata"]["namespace"]
        for path, body in ((f"/api/v1/namespaces/{ns}/configmaps", cm), (f"/apis/batch/v1/namespaces/{ns}/jobs", job)):
            try:
                self.api.request("POST", path, body=body, query={"dryRun": "All"}, timeout=(2.0, 5.0))
            except ApiError as exc:
                if exc.transient or exc.status in (401, 403):
                    return  # cannot tell now; the real create reports it
                raise BackendError(_rejection(exc, body)) from None

    # --- helpers on the loop thread --------------------------------------------------------------------
    def _note(self, t: _Tracked, line: str) -> None:
        if t.job_dir is None:
            return
        self._append_log(t.job_dir, f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: {line}\n".encode())

    def _append_log(self, job_dir: Path, data: bytes) -> None:
        try:
            with self._file_lock:
                job_dir.mkdir(parents=True, exist_ok=True)
                with open(log_path(job_dir), "ab") as f:
                    f.write(data)
        except OSError:
            pass

    # --- cluster view (lock held) ------------------------------------------------------------------
    def _summarise(self, node: Mapping) -> tuple[str, int, bool] | None:
        meta = node.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            return None
        gpus = _node_gpus(node, self.cfg.gpu_resource)
        if gpus <= 0 or (node.get("spec") or {}).get("unschedulable"):
            return None  # (a cordoned node is being drained: its jobs are moved, nothing new goes there)
        pool = (meta.get("labels") or {}).get(self.cfg.pool_label) or self.cfg.default_pool
        if self.cfg.pools and pool not in self.cfg.pools:
            return None
        taints = (node.get("spec") or {}).get("taints") or ()
        spot = pool in self.cfg.spot_pools or any(t.get("key") == self.cfg.spot_taint for t in taints)
        return pool, gpus, spot

    def _eligible_nodes(self) -> dict[str, NodeSpec]:
        out = {}
        for name, node in self._nodes.items():
            s = self._summarise(node)
            if s is not None:
                out[name] = NodeSpec(name, s[1], s[0])
        return out

    def _placement_of(self, node: str | None) -> tuple[str | None, bool]:
        if node is None:
            return None, False
        obj = self._nodes.get(node)
        s = self._summarise(obj) if obj is not None else None
        if s is None:
            spec = self._reported_nodes.get(node)
            return (spec.pool if spec else None), (spec.pool in self.cfg.spot_pools if spec else False)
        return s[0], s[2]

    def _node_updates(self, now: float) -> list[BackendUpdate]:
        current = self._eligible_nodes()
        out = []
        for name, spec in sorted(self._reported_nodes.items()):
            if current.get(name) != spec:
                out.append(BackendUpdate("", "node_lost", now, f"node {name} went away", node=spec))
                del self._reported_nodes[name]
        for name, spec in sorted(current.items()):
            if name not in self._reported_nodes:
                spot = self._placement_of(name)[1]
                out.append(BackendUpdate("", "node_added", now, f"node {name} joined", node=spec, pool=Pool(spec.pool, spot=spot)))
                self._reported_nodes[name] = spec
        return out

    def _observed_attempt(self, job_id: str) -> int:
        kj = self._jobs.get(job_id)
        if kj is None:
            return 0
        ann = ((kj["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
        try:
            return int(ann.get(A_ATTEMPT, 0))
        except ValueError:
            return 0

    # --- watch callbacks (watcher threads) ---------------------------------------------------------------
    def _job_id_of(self, obj: Mapping) -> str | None:
        meta = obj.get("metadata") or {}
        return (meta.get("annotations") or {}).get(A_JOB_ID) or (meta.get("labels") or {}).get(L_JOB_ID)

    def _relisted(self, kind: str, path: str, items: list[dict]) -> None:
        for obj in items:
            _slim(obj)
        with self._lock:
            if kind == "node":
                self._nodes = {i["metadata"]["name"]: i for i in items}
                self._nodes_dirty = True
                return
            ns = path.split("/namespaces/")[1].split("/")[0]
            if kind == "job":
                fresh = {}
                for obj in items:
                    jid = self._job_id_of(obj)
                    if jid:
                        fresh[jid] = obj
                gone = [j for j, o in self._jobs.items() if o["metadata"]["namespace"] == ns and j not in fresh]
                for j in gone:
                    del self._jobs[j]
                self._jobs.update(fresh)
                for j in set(gone) | set(fresh):
                    self._evaluate(j, deleted=j in gone)
                self._maybe_finish_adoption()
            else:
                fresh_pods: dict[str, dict[str, dict]] = {}
                for obj in items:
                    jid = self._job_id_of(obj)
                    if jid:
                        fresh_pods.setdefault(jid, {})[obj["metadata"]["name"]] = obj
                touched = set(fresh_pods)
                for jid, pods in list(self._pods.items()):
                    kept = {n: p for n, p in pods.items() if p["metadata"]["namespace"] != ns}
                    if len(kept) != len(pods):
                        touched.add(jid)
                        for n, p in pods.items():
                            if n not in kept and n not in fresh_pods.get(jid, {}):
                                self._pod_log_seen(jid, p, gone=True)
                    if kept:
                        self._pods[jid] = kept
                    else:
                        del self._pods[jid]
                for jid, pods in fresh_pods.items():
                    self._pods.setdefault(jid, {}).update(pods)
                    for p in pods.values():
                        self._pod_log_seen(jid, p)
                for j in touched:
                    self._evaluate(j)

    def _event(self, kind: str, etype: str, obj: dict) -> None:
        _slim(obj)
        with self._lock:
            if kind == "node":
                name = obj["metadata"]["name"]
                if etype == "DELETED":
                    self._nodes.pop(name, None)
                else:
                    self._nodes[name] = obj
                self._nodes_dirty = True
                return
            jid = self._job_id_of(obj)
            if not jid:
                return
            if kind == "job":
                if etype == "DELETED":
                    if self._jobs.get(jid, {}).get("metadata", {}).get("uid") == obj["metadata"].get("uid"):
                        del self._jobs[jid]
                    self._evaluate(jid, deleted=True)
                else:
                    self._jobs[jid] = obj
                    self._evaluate(jid)
            else:
                pods = self._pods.setdefault(jid, {})
                if etype == "DELETED":
                    pods.pop(obj["metadata"]["name"], None)
                    if not pods:
                        del self._pods[jid]
                else:
                    pods[obj["metadata"]["name"]] = obj
                self._pod_log_seen(jid, obj, gone=etype == "DELETED")
                self._evaluate(jid)

    def _evaluate(self, job_id: str, deleted: bool = False) -> None:
        """Turn what the caches show about one job into news for the service (lock held)."""
        t = self._tracked.get(job_id)
        if t is None or t.want != "run" or t.reported_final:
            return
        kj = self._jobs.get(job_id)
        now = time.time()
        if kj is None:
            if t.seen and not t.recreate:
                # Deleted behind our back (kubectl delete job), or a re-list raced our create: a worker
                # asks the API server which, and reports the job lost if the Job is really gone.
                self._enqueue(job_id, 0.0)
            return
        t.seen = True
        if t.adopted and t.manifests is None:
            observed = self._observed_attempt(job_id)
            if observed > t.attempt:
                if t.started_attempt == t.attempt:
                    t.started_attempt = observed  # still the running attempt the store knew
                t.attempt = observed
        if not t.namespace:
            t.namespace = kj["metadata"]["namespace"]
            t.name = kj["metadata"]["name"]
        if kj["metadata"].get("deletionTimestamp"):
            return
        if _cond_true(kj, "Complete") or _cond_true(kj, "SuccessCriteriaMet"):
            t.want, t.reported_final = "done", True
            self._updates.append(BackendUpdate(job_id, "succeeded", now))
            self._note(t, "the Job completed")
            return
        failed = _cond_true(kj, "Failed") or _cond_true(kj, "FailureTarget")
        if failed and not t.recreate:
            if t.manifests is not None and self._observed_attempt(job_id) < t.attempt:
                return  # a failure of an earlier attempt: the worker deletes and re-creates the Job
            message = self._failure_message(job_id, kj, failed)
            t.want, t.reported_final = "done", True
            self._updates.append(BackendUpdate(job_id, "failed", now, message))
            self._note(t, f"the Job failed: {message}")
            return
        if kj["spec"].get("suspend") or self._observed_attempt(job_id) != t.attempt:
            return
        for pod in (self._pods.get(job_id) or {}).values():
            meta = pod["metadata"]
            if (meta.get("annotations") or {}).get(A_ATTEMPT) != str(t.attempt):
                continue
            disrupted = _cond_true(pod, "DisruptionTarget")
            if disrupted:
                # Evicted (drain, spot termination, taint manager): not the notebook's fault. Stop the Job here
                # and requeue the job, which resumes from its checkpoint wherever the core places it next.
                why = f"pod {meta['name']} was evicted ({disrupted.get('reason') or 'DisruptionTarget'})"
                if disrupted.get("message"):
                    why += f": {disrupted['message']}"
                t.want, t.reported_final = "suspend", True
                self._enqueue(job_id, 0.0)
                self._updates.append(BackendUpdate(job_id, "preempted", now, why))
                self._note(t, why)
                return
        if t.started_attempt == t.attempt:
            return
        for pod in (self._pods.get(job_id) or {}).values():
            meta, status = pod["metadata"], pod.get("status") or {}
            if meta.get("deletionTimestamp") or status.get("phase") != "Running":
                continue
            if t.node and self.cfg.pin_nodes and (pod.get("spec") or {}).get("nodeName") != t.node:
                continue
            if (meta.get("annotations") or {}).get(A_ATTEMPT, str(t.attempt)) != str(t.attempt):
                continue
            t.started_attempt = t.attempt
            t.last_beat = now
            self._updates.append(BackendUpdate(job_id, "started", now))
            self._note(t, f"pod {meta['name']} running on {(pod.get('spec') or {}).get('nodeName')}")
            return

    def _failure_message(self, job_id: str, kj: Mapping, cond: Mapping) -> str:
        reason, message = cond.get("reason") or "Failed", cond.get("message") or ""
        if reason == "DeadlineExceeded":
            secs = kj["spec"].get("activeDeadlineSeconds")
            return f"max_runtime exceeded ({secs} s)"
        detail = ""
        for pod in sorted((self._pods.get(job_id) or {}).values(), key=lambda p: p["metadata"].get("creationTimestamp") or ""):
            for cs in (pod.get("status") or {}).get("containerStatuses") or ():
                term = (cs.get("state") or {}).get("terminated")
                if term and term.get("exitCode"):
                    detail = f"exit code {term['exitCode']}" + (
                        f" ({term.get('reason') or ''}{': ' + term['message'] if term.get('message') else ''})" if term.get("reason") or term.get("message") else ""
                    )
        text = f"{reason}: {message}" if message else reason
        return f"{text}; last pod: {detail}" if detail else text

    def _maybe_finish_adoption(self) -> None:
        """Once Jobs are listed in every namespace, resolve store vs cluster (lock held)."""
        if self._adoption is None or self._adoption_done:
            return
        if not all(w.synced.is_set() for w in self._watchers if w.kind == "job"):
            return
        self._adoption_done = True
        now = time.time()
        for job_id, (state, _alloc) in self._adoption.items():
            t = self._tracked.get(job_id)
            if state.holds_gpus and t is not None and t.adopted and t.want == "run":
                if job_id not in self._jobs and t.manifests is None:
                    t.want, t.reported_final = "done", True
                    self._updates.append(
                        BackendUpdate(job_id, "preempted", now, "its Kubernetes Job was gone after the restart; requeued")
                    )
                else:
                    self._evaluate(job_id)
                    self._enqueue(job_id, 0.0)  # make sure it is admitted where the store says
        for job_id, kj in list(self._jobs.items()):
            if job_id in self._tracked:
                continue
            state = self._adoption.get(job_id, (None, ()))[0]
            meta = kj["metadata"]
            finished = _cond_true(kj, "Complete") or _cond_true(kj, "Failed")
            if state is None or (state is not None and state.terminal and not finished) or state is JobState.CANCELLED:
                want = "delete"
            elif state in (JobState.QUEUED, JobState.PREEMPTED, JobState.LOST) and not kj["spec"].get("suspend"):
                want = "suspend"
            else:
                continue
            log.warning("reconcile: %s Job %s/%s of %s job %s", "deleting" if want == "delete" else "suspending", meta["namespace"], meta["name"], state.value if state else "unknown", job_id)
            self._tracked[job_id] = _Tracked(job_id, meta["name"], meta["namespace"], want)
            self._enqueue(job_id, 0.0)

    # --- pod logs -> log.txt --------------------------------------------------------------------------------
    def _pod_log_seen(self, job_id: str, pod: Mapping, gone: bool = False) -> None:
        """Note what a pod event means for copying its log (lock held; watcher threads)."""
        if not self.cfg.copy_logs:
            return
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        key = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        pl = self._podlogs.get(key)
        if pl is None:
            t = self._tracked.get(job_id)
            if gone or t is None or t.job_dir is None:
                return  # a job this service did not launch (adopted after a restart: its log.txt is not ours)
            containers = (pod.get("spec") or {}).get("containers") or [{}]
            pl = _PodLog(
                job_id,
                meta.get("namespace") or "",
                meta.get("name") or "",
                containers[0].get("name") or "",
                (meta.get("annotations") or {}).get(A_ATTEMPT, "?"),
                meta.get("creationTimestamp") or "",
            )
            self._podlogs[key] = pl
            self._podlogs_active.add(key)
        if pl.done:
            if gone:
                del self._podlogs[key]
            return
        states = [cs.get("state") or {} for cs in status.get("containerStatuses") or ()]
        wake = False
        if not pl.started and any("running" in st or "terminated" in st for st in states):
            pl.started, pl.due, wake = True, 0.0, True
        if not pl.final and (gone or meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed")):
            pl.final, pl.due, wake = True, 0.0, True
        if pl.final and not pl.started and not pl.header:
            self._podlog_done(key, pl)  # it never ran: there is no log to copy
            return
        if wake:
            self._logs_wake.notify()

    def _podlog_done(self, key: str, pl: _PodLog) -> None:
        pl.done = True
        self._podlogs_active.discard(key)

    def _due_podlogs(self, now: float) -> tuple[list[tuple[str, _PodLog, Path, bool]], float]:
        """The pods whose log is due now (the oldest unfinished pod of each job first, so one attempt's lines
        are never mixed with the next one's), and when the next one is due (lock held)."""
        first: dict[str, tuple[tuple[bool, str, str], str, _PodLog]] = {}
        for key in self._podlogs_active:
            pl = self._podlogs[key]
            if not pl.started:
                continue
            order = (not pl.final, pl.created, pl.name)  # (a Job runs one pod at a time: an ended one is older)
            cur = first.get(pl.job_id)
            if cur is None or order < cur[0]:
                first[pl.job_id] = (order, key, pl)
        due, nxt = [], math.inf
        for _, key, pl in first.values():
            t = self._tracked.get(pl.job_id)
            if t is None or t.job_dir is None:
                self._podlog_done(key, pl)
                continue
            if pl.due <= now:
                due.append((key, pl, t.job_dir, pl.final))
            else:
                nxt = min(nxt, pl.due)
        return due, nxt

    def _log_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                due, nxt = self._due_podlogs(time.monotonic())
                if not due:
                    self._logs_wake.wait(max(0.01, min(nxt - time.monotonic(), 1.0)))
                    continue
            for key, pl, job_dir, final in due:
                if self._stopping.is_set():
                    return
                try:
                    self._copy_pod_log(key, pl, job_dir, final)
                except Exception:  # a bug must not end the copying of every other log
                    log.exception("pod %s/%s: copying its log failed", pl.namespace, pl.name)
                    with self._lock:
                        self._podlog_done(key, pl)

    def _copy_pod_log(self, key: str, pl: _PodLog, job_dir: Path, final: bool) -> None:
        """One fetch of one pod's log, appended to log.txt (log thread; no lock held while talking)."""
        # sinceTime has whole seconds: a fetch sends again what was copied within the last line's second.
        limit = max(1024, int(self.cfg.log_limit_bytes))
        limit += min(pl.sec_bytes, 15 * limit)
        query: dict[str, Any] = {"container": pl.container or None, "timestamps": True, "limitBytes": limit}
        if pl.since_ns >= 0:
            query["sinceTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pl.since_ns // 1_000_000_000))
        path = f"/api/v1/namespaces/{pl.namespace}/pods/{pl.name}/log"
        try:
            resp = self.api.request("GET", path, query=query, stream=True, timeout=(3.0, self.cfg.request_timeout))
            try:
                data = resp.data or b""
            finally:
                try:
                    resp.release_conn()
                except Exception:
                    pass
        except ApiError as exc:
            with self._lock:
                if exc.status == 404 or (final and exc.status != 0 and pl.failures >= 5):
                    log.debug("pod %s/%s: log no longer readable (%s %s); done with it", pl.namespace, pl.name, exc.status, exc.message)
                    self._podlog_done(key, pl)
                    return
                if exc.status != 0:
                    pl.failures += 1
                delay = min(0.5 * 2 ** min(pl.failures, 6), max(self.cfg.log_interval, self.cfg.max_backoff))
                log.debug("pod %s/%s: cannot read its log yet (%s %s); again in %.1f s", pl.namespace, pl.name, exc.status, exc.message, delay)
                pl.due = time.monotonic() + delay
            return
        except Exception as exc:  # the body broke off: as an unreachable API server
            log.debug("pod %s/%s: reading its log broke off: %s", pl.namespace, pl.name, exc)
            with self._lock:
                pl.due = time.monotonic() + max(self.cfg.log_interval, 1.0)
            return
        truncated = len(data) >= limit
        lines, since_ns, at_since, sec_bytes = split_log_lines(data, pl.since_ns, pl.at_since, truncated, pl.sec_bytes)
        out = bytearray()
        if lines and not pl.header:
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: ----- attempt {pl.attempt}: log of pod {pl.name} -----\n".encode()
            pl.header = True
        for line in lines:
            out += line + b"\n"
        stop = False
        if truncated and not lines and since_ns == pl.since_ns and at_since == pl.at_since:
            # More than 16 x limitBytes within the second we resume from, all copied already: skip the rest of
            # that second rather than fetch the same bytes for ever.
            since_ns, at_since, sec_bytes = (pl.since_ns // 1_000_000_000 + 1) * 1_000_000_000, 0, 0
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: (log lines skipped: more than {limit} bytes within one second)\n".encode()
        if pl.copied + len(out) > self.cfg.log_max_bytes:
            out = out[: max(0, self.cfg.log_max_bytes - pl.copied)]
            if out and not out.endswith(b"\n"):
                out += b"\n"
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: (the copy of pod {pl.name}'s log stops here: {self.cfg.log_max_bytes} bytes)\n".encode()
            stop = True
        if out:
            self._append_log(job_dir, bytes(out))
        with self._lock:
            pl.since_ns, pl.at_since, pl.sec_bytes, pl.failures = since_ns, at_since, sec_bytes, 0
            pl.copied += len(out)
            if stop or (final and not truncated):
                self._podlog_done(key, pl)
            else:
                pl.due = time.monotonic() + (0.0 if truncated else self.cfg.log_interval)
                if pl.final and not final:
                    pl.due = 0.0  # it ended while we read: once more, to the end

    # --- API health ---------------------------------------------------------------------------------------
    def _api_ok(self) -> None:
        if not self.api_up:
            if self.api_down_since is not None:
                log.warning("the Kubernetes API server is reachable again after %.0f s", time.time() - self.api_down_since)
            self.api_up = True
            self.api_down_since = None
            self.api_error = ""

    def _api_failed(self, exc: ApiError) -> None:
        self.stats["api_errors"] += 1
        if exc.status == 0:
            if self.api_up or self.api_down_since is None:
                log.warning("Kubernetes API server unreachable: %s (retrying)", exc.message)
                self.api_down_since = time.time()
            self.api_up = False
        self.api_error = exc.message

    # --- the work queue ------------------------------------------------------------------------------------
    def _enqueue(self, job_id: str, delay: float) -> None:
        due = time.monotonic() + delay
        old = self._queued.get(job_id)
        if old is not None and old <= due:
            return
        self._queued[job_id] = due
        heapq.heappush(self._queue, (due, next(self._seq), job_id))
        self._wake.notify()

    def _work_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                job_id = None
                while job_id is None and not self._stopping.is_set():
                    now = time.monotonic()
                    while self._queue:
                        due, _, jid = self._queue[0]
                        if self._queued.get(jid) != due:
                            heapq.heappop(self._queue)  # superseded by an earlier entry
                            continue
                        if due > now:
                            break
                        heapq.heappop(self._queue)
                        del self._queued[jid]
                        if jid in self._inflight:
                            self._enqueue(jid, 0.05)
                            continue
                        job_id = jid
                        break
                    if job_id is None:
                        timeout = (self._queue[0][0] - now) if self._queue else 1.0
                        self._wake.wait(max(0.005, min(timeout, 1.0)))
                if job_id is None:
                    return
                self._inflight.add(job_id)
            retry: float | None = None
            try:
                retry = self._sync(job_id)
            except ApiError as exc:
                self._api_failed(exc)
                self.stats["retries"] += 1
                with self._lock:
                    t = self._tracked.get(job_id)
                    if t is not None:
                        t.backoff = min(max(t.backoff * 2, 0.2), self.cfg.max_backoff)
                        retry = max(t.backoff, exc.retry_after or 0.0)
                if exc.status not in (0, 409):
                    log.warning("job %s: Kubernetes API error %s (%s); retrying in %.1f s", job_id, exc.status, exc.message, retry or 0)
            except Exception:
                log.exception("job %s: unexpected error talking to Kubernetes; retrying", job_id)
                retry = self.cfg.max_backoff
            finally:
                with self._lock:
                    self._inflight.discard(job_id)
                    if retry is not None and not self._stopping.is_set():
                        self._enqueue(job_id, retry)

    def _sync(self, job_id: str) -> float | None:
        """Move one job's Job one step towards what the service wants. Returns a delay to look again, or None."""
        with self._lock:
            t = self._tracked.get(job_id)
            if t is None:
                return None
            want, kj = t.want, self._jobs.get(job_id)
            if not t.namespace and kj is not None:
                t.namespace, t.name = kj["metadata"]["namespace"], kj["metadata"]["name"]
            ns, name, node, pool, spot, attempt = t.namespace, t.name, t.node, t.pool, t.spot, t.attempt
            manifests, recreate, seen = t.manifests, t.recreate, t.seen and not t.recreate
        if not ns:
            return None  # adopted job whose Job we have not seen: the adoption pass reports it
        jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        job_path = f"{jobs_path}/{name}"
        if want == "done":
            return None
        if want == "delete":
            try:
                self.api.request("DELETE", job_path, query={"propagationPolicy": "Background"})
                self.stats["deletes"] += 1
            except ApiError as exc:
                if exc.status != 404:
                    raise
            self._delete_configmap(ns, name)
            with self._lock:
                if t.want == "delete":
                    t.want = "done"
            return None
        log.debug("job %s: sync want=%s job=%s", job_id, want, "none" if kj is None else f"suspend={kj['spec'].get('suspend')} attempt={self._observed_attempt_of(kj)}/{attempt}")
        if want == "suspend":
            if kj is None or kj["metadata"].get("deletionTimestamp"):
                return None
            if _cond_true(kj, "Complete") or _cond_true(kj, "Failed"):
                return None
            if not kj["spec"].get("suspend"):
                self._patch(job_path, {"spec": {"suspend": True}})
            self._clear_start_time(job_path)
            return None
        # want == "run"
        if kj is not None and kj["metadata"].get("deletionTimestamp"):
            return 0.3  # an earlier incarnation is still going away
        if kj is not None and (_cond_true(kj, "Failed") and (recreate or (manifests is not None and self._observed_attempt_of(kj) < attempt))):
            with self._lock:
                t.recreate = True
            try:
                self.api.request("DELETE", job_path, query={"propagationPolicy": "Background"})
            except ApiError as exc:
                if exc.status != 404:
                    raise
            return 0.3
        if kj is None and seen:
            try:
                kj = self.api.request("GET", job_path)
            except ApiError as exc:
                if exc.status != 404:
                    raise
                with self._lock:
                    if t.want == "run" and not t.reported_final and job_id not in self._jobs:
                        t.want, t.reported_final = "done", True
                        self._updates.append(BackendUpdate(job_id, "lost", time.time(), f"the Kubernetes Job {ns}/{name} was deleted"))
                return None
            with self._lock:
                self._jobs.setdefault(job_id, kj)
        if kj is None:
            if manifests is None:
                return None
            job = self._create(jobs_path, job_path, ns, name, manifests)
            if job is None:
                return None  # refused: reported as failed
            with self._lock:
                t.recreate = False
                t.seen = True
                if job_id not in self._jobs:
                    self._jobs[job_id] = job
            kj = job
        if _cond_true(kj, "Complete"):
            with self._lock:
                self._evaluate(job_id)
            return None
        current = self._observed_attempt_of(kj)
        if current == attempt and not kj["spec"].get("suspend"):
            return None  # already admitted as wanted
        if not kj["spec"].get("suspend"):
            # Still running an earlier attempt: stop it, and place it again only once the Job controller has
            # taken its pod away (unsuspending at once could leave the old pod running where it was).
            self._patch(job_path, {"spec": {"suspend": True}})
            self._clear_start_time(job_path)
            return 0.2
        if self._live_pods(job_id):
            return 0.2
        if (kj.get("status") or {}).get("startTime"):
            self._clear_start_time(job_path)
        log.debug("job %s: admitting attempt %d on %s (pool %s)", job_id, attempt, node, pool)
        try:
            self._patch(job_path, placement_patch(node, pool, spot, attempt, self.cfg))
        except ApiError as exc:
            if exc.status == 422 and "immutable" in exc.message:
                # The Job controller has not caught up with the suspension yet: clear and try again shortly.
                self._clear_start_time(job_path)
                return 0.2
            if exc.status in (400, 422, 403, 404):
                self._refused(job_id, exc, "admitting")
                return None
            raise
        with self._lock:
            t.backoff = 0.0
        return None

    def _live_pods(self, job_id: str) -> list[str]:
        """Pods of the job that are neither finished nor being deleted (from the cache)."""
        with self._lock:
            return [
                name
                for name, pod in (self._pods.get(job_id) or {}).items()
                if not pod["metadata"].get("deletionTimestamp")
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]

    @staticmethod
    def _observed_attempt_of(kj: Mapping) -> int:
        ann = ((kj["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
        try:
            return int(ann.get(A_ATTEMPT, 0))
        except ValueError:
            return 0

    def _patch(self, path: str, body: dict) -> dict:
        self.stats["patches"] += 1
        return self.api.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def _clear_start_time(self, job_path: str) -> None:
        try:
            self.api.request(
                "PATCH", job_path + "/status", body={"status": {"startTime": None}}, content_type="application/merge-patch+json"
            )
        except ApiError as exc:
            if exc.status not in (404, 422):
                raise

    def _create(self, jobs_path: str, job_path: str, ns: str, name: str, manifests: tuple[dict, dict]) -> dict | None:
        job_manifest, cm_manifest = manifests
        try:
            job = self.api.request("POST", jobs_path, body=job_manifest)
            self.stats["creates"] += 1
        except ApiError as exc:
            if exc.status == 409:
                job = self.api.request("GET", job_path)
                if (job.get("metadata") or {}).get("deletionTimestamp"):
                    raise  # the old one is still being deleted: retry
                if (job["metadata"].get("annotations") or {}).get(A_JOB_ID) != job_manifest["metadata"]["annotations"][A_JOB_ID]:
                    self._refused(job_manifest["metadata"]["annotations"][A_JOB_ID], ApiError(409, f"a Job named {ns}/{name} already exists and belongs to something else"), "creating")
                    return None
            elif exc.status in (400, 403, 404, 422):
                self._refused(job_manifest["metadata"]["annotations"][A_JOB_ID], exc, "creating", job_manifest)
                return None
            else:
                raise
        cm = json.loads(json.dumps(cm_manifest))
        cm["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": job["metadata"]["uid"], "blockOwnerDeletion": False}
        ]
        cm_path = f"/api/v1/namespaces/{ns}/configmaps"
        try:
            self.api.request("POST", cm_path, body=cm)
        except ApiError as exc:
            if exc.status == 409:
                self.api.request("PUT", f"{cm_path}/{name}", body=cm)
            elif exc.status in (400, 403, 404, 422):
                self._refused(job_manifest["metadata"]["annotations"][A_JOB_ID], exc, "creating", cm)
                try:
                    self.api.request("DELETE", job_path, query={"propagationPolicy": "Background"})
                except ApiError:
                    pass
                return None
            else:
                raise
        return job

    def _delete_configmap(self, ns: str, name: str) -> None:
        try:
            self.api.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise

    def _refused(self, job_id: str, exc: ApiError, doing: str, body: Mapping | None = None) -> None:
        message = _rejection(exc, body)
        log.warning("job %s: %s", job_id, message)
        with self._lock:
            t = self._tracked.get(job_id)
            if t is None or t.reported_final:
                return
            t.want, t.reported_final = "done", True
            self._updates.append(BackendUpdate(job_id, "failed", time.time(), message))
        self._note(t, message)


def _rejection(exc: ApiError, body: Mapping | None) -> str:
    kind = (body or {}).get("kind", "object")
    return f"the Kubernetes API server rejected the {kind} ({exc.status} {exc.reason or 'error'}): {exc.message}"


# --- `jupyter gpusched manifest` --------------------------------------------------------------------------
def manifest_main(argv: list[str]) -> int:
    """`jupyter gpusched manifest NOTEBOOK [...]`: print the Job and ConfigMap YAML the backend would create."""
    import argparse
    import sys

    from ...cli import _param

    p = argparse.ArgumentParser(prog="jupyter gpusched manifest", description=manifest_main.__doc__.split(":", 1)[1].strip())
    p.add_argument("notebook")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--priority", choices=["high", "normal", "low"], default="normal")
    p.add_argument("--tenant", default="default")
    p.add_argument("--owner", default=os.environ.get("USER", ""))
    p.add_argument("-p", "--param", dest="params", action="append", type=_param, default=[], metavar="NAME=VALUE")
    p.add_argument("--max-runtime", type=float)
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--preemptible", action="store_true")
    p.add_argument("--job-id", default="example", help="job id to name the Job after (default: example)")
    p.add_argument("--node", help="show the admission patch for this node")
    p.add_argument("--pool", help="pool of --node")
    p.add_argument("--spot", action="store_true", help="--node is a spot node (adds the toleration)")
    p.add_argument("--namespace", help="default: c.GPUSched.k8s_namespace")
    p.add_argument("--image", help="default: c.GPUSched.k8s_image")
    p.add_argument("--config", help="a jupyter_server_config.py/.json to read c.GPUSched.k8s_* from")
    p.add_argument("--no-configmap", action="store_true", help="print only the Job")
    args = p.parse_args(argv)
    cfg = _config_from_files(args.config)
    if args.namespace:
        cfg.namespace = args.namespace
        cfg.tenant_namespaces = {}
    if args.image:
        cfg.image = args.image
    try:
        text = Path(args.notebook).read_text(encoding="utf-8")
        params = validate_parameters(dict(args.params))
        spec = JobSpec(
            notebook=args.notebook,
            gpus=args.gpus,
            priority=Priority.parse(args.priority),
            tenant=args.tenant,
            owner=args.owner,
            parameters=params,
            max_runtime=args.max_runtime,
            preemptible=args.preemptible,
            max_retries=args.max_retries,
        )
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    job, cm = build_manifests(args.job_id, spec, text, params, cfg)
    docs: list[dict[str, Any]] = [job] if args.no_configmap else [job, cm]
    out = manifest_yaml(docs)
    if args.node or args.pool:
        patch = placement_patch(args.node, args.pool or cfg.default_pool, args.spot, 1, cfg)
        out += "# admission: kubectl patch job {} -n {} --type=merge -p '{}'\n".format(
            job["metadata"]["name"], job["metadata"]["namespace"], json.dumps(patch, separators=(",", ":"))
        )
    sys.stdout.write(out)
    return 0


def _config_from_files(path: str | None) -> KubernetesConfig:
    """KubernetesConfig from the c.GPUSched.k8s_* settings: of one config file, or of Jupyter's config
    folders (jupyter_server_config.py / .json)."""
    try:
        from jupyter_core.paths import jupyter_config_path
        from traitlets.config import Config
        from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

        from ...server.app import GPUSched

        if path:
            files = [Path(path)]
        else:
            files = [Path(d) / f"jupyter_server_config{ext}" for d in reversed(jupyter_config_path()) for ext in (".json", ".py")]
        config = Config()
        for f in files:
            if f.is_file():
                loader = PyFileConfigLoader if f.suffix == ".py" else JSONFileConfigLoader
                config.merge(loader(f.name, path=str(f.parent)).load_config())
        return GPUSched(config=config).kubernetes_config()
    except Exception as exc:  # a broken config file must not hide the manifest
        log.warning("using the default kubernetes settings: %s", exc)
        return KubernetesConfig()
