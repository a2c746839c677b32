"""The Kubernetes backend: each job is a `batch/v1` Job, created suspended, that the core admits.

docs/kubernetes.md has the operator's view; the modules of this package each hold one part of it: `names`
(RFC 1123 names, labels), `manifests` (the Job, its ConfigMap, the admission patch), `api` (the client),
`watch` (list + watch caches), `status` (what the caches mean: capacity, job news), `reconcile` (the workers
that create, patch and delete Jobs; the start-up reconcile), `podlogs` (pod logs -> log.txt). This module
wires them into the `Backend` protocol.

Threads: all API I/O happens off the service's loop. `poll()` only hands over news the watchers found:
started, succeeded / failed / lost, `node_added` / `node_lost` (the cluster's GPU nodes are the inventory),
`preempted` (evicted, or the Job vanished while the service was down). While the API server is unreachable the
backend keeps the last state it saw, so running jobs keep their heartbeats and nothing is requeued just
because the control plane blinked.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, validate

from ...core.model import Allocation, JobSpec, JobState, NodeSpec, Pool, Tenant
from ..base import Backend, BackendError, BackendUpdate, LaunchRequest, validate_parameters
from ..logcap import DEFAULT_MAX_LOG_BYTES
from .api import Api, Connection, KubeApiError, rejection
from .config import GPU_RESOURCE, SETTINGS, KubernetesConfig
from .gang import GangError, gpus_per_node, make_gang
from .kueue import KINDS as KUEUE_KINDS
from .kueue import KueueCache, queue_name, watch_paths
from .kueue import placed as kueue_placed
from .manifests import build_manifests
from .names import digest, instance_selector, job_name
from .nodefacts import resource_for, split_node
from .podlogs import PodLogCopier
from .reconcile import Reconciler
from .state import SharedState, Tracked
from .status import eligible_nodes, evaluate, node_news, observed_attempt, placement_of, pools_of
from .upload import A_TOKEN_HASH, add_upload, new_token, token_matches
from .watch import Changes, Watcher

log = logging.getLogger(__name__)

PodCustomizer = Callable[[dict[str, Any], JobSpec, Mapping[str, Any]], None]


class KubernetesBackend(Backend):
    """Runs each job as a suspended-then-admitted `batch/v1` Job on a Kubernetes cluster."""

    name = "kubernetes"

    kubeconfig = Unicode(
        "", config=True, help="Kubeconfig file. Empty: $KUBECONFIG or ~/.kube/config, else in-cluster."
    )
    context = Unicode("", config=True, help="Kubeconfig context. Empty: the current context.")
    in_cluster = Bool(False, config=True, help="Use the pod's service account (the service runs in the cluster).")
    namespace = Unicode("default", config=True, help="Namespace of the Jobs.")
    tenant_namespaces = Dict(
        config=True, help="{tenant: namespace} for tenants whose Jobs go to a namespace of their own."
    )
    image = Unicode(
        "quay.io/jupyter/scipy-notebook:latest", config=True, help="Container image of the jobs (must have papermill)."
    )
    image_pull_policy = Unicode("IfNotPresent", config=True, help="imagePullPolicy of the job container.")
    pool_label = Unicode("gpusched.io/pool", config=True, help="Node label whose value is the node's pool.")
    default_pool = Unicode("default", config=True, help="Pool of GPU nodes without the pool label.")
    allowed_pools = List(Unicode(), config=True, help="Use only nodes of these pools. Empty: every GPU node.")
    spot_pools = List(
        Unicode(),
        config=True,
        help="Pools known to be spot (besides those whose nodes carry spot_taint). The server fills it from the "
        "spot pools of c.GPUSched.pools.",
    )
    spot_taint = Unicode(
        "gpusched.io/spot",
        config=True,
        help="Taint key of spot nodes (their pools are spot; Jobs placed there tolerate it).",
    )
    gpu_resource = Unicode(GPU_RESOURCE, config=True, help="Extended resource name of a GPU.")
    gpu_taint = Unicode(
        GPU_RESOURCE,
        config=True,
        help="Taint key of GPU nodes (nvidia.com/gpu:NoSchedule, as GPU node pools set it): job pods tolerate it.",
    )
    tolerations = List(
        Dict(),
        config=True,
        help="More tolerations for every job pod, e.g. [{'key': 'dedicated', 'operator': 'Equal', 'value': 'ml', "
        "'effect': 'NoSchedule'}].",
    )
    instance = Unicode("default", config=True, help="Label value telling this service's Jobs from another's.")
    service_account = Unicode("", config=True, help="Service account of the job pods. Empty: the namespace default.")
    output_volume = Dict(
        config=True,
        help="A pod volume (without name), e.g. {'persistentVolumeClaim': {'claimName': 'gpusched'}}, "
        "mounted at /gpusched/output with the Job's name as subPath. Empty: an emptyDir.",
    )
    container_resources = Dict(
        config=True, help="Extra container resources, e.g. {'requests': {'cpu': '4', 'memory': '32Gi'}}."
    )
    ttl_after_finished = Int(86400, config=True, help="Seconds a finished Job is kept (-1: forever).")
    copy_logs = Bool(
        True, config=True, help="Copy each pod's container log into the job's log (needs RBAC pods/log get)."
    )
    log_interval = Float(5.0, config=True, help="Seconds between log fetches of a running pod.")
    log_workers = Int(4, config=True, help="Threads fetching pod logs side by side (copy_logs).")
    max_log_bytes = Int(
        DEFAULT_MAX_LOG_BYTES,
        config=True,
        help="Cap of a job's log.txt (all its pods' copies) in bytes: past it the head is dropped (the last half "
        "of the cap is kept, under a line that says so). 0: no cap.",
    )
    workers = Int(4, config=True, help="Threads writing to the API server.")
    upload_url = Unicode(
        "",
        config=True,
        help="The service's URL as job pods reach it (e.g. http://gpusched.jhub.svc:8888/ with its base URL): "
        "pods then upload their executed notebook and output folder there with a job-scoped token. Empty: off "
        "(results only on output_volume).",
    )
    upload_interval = Float(10.0, config=True, help="Seconds between uploads of a running job's notebook.")
    max_upload_bytes = Int(1 << 30, config=True, help="Cap of a job's uploaded output folder, in bytes.")
    preempt_grace = Float(
        30.0,
        config=True,
        help="Seconds a stopped (preempted) job's pod has after SIGTERM to save a checkpoint before SIGKILL: its "
        "terminationGracePeriodSeconds (rounded up). The pod's entry passes the SIGTERM on to the kernel.",
    )

    admission = Enum(
        ["core", "kueue"],
        "core",
        config=True,
        help="Who admits jobs: 'core' (this service's scheduler places each Job) or 'kueue' (an existing Kueue "
        "admits them against its ClusterQueues; the service keeps the books and shows Kueue's quotas and reasons).",
    )
    kueue_queues = Dict(
        config=True, help="admission='kueue': {tenant: LocalQueue name}. A tenant not listed uses its own name."
    )
    kueue_priority_classes = Dict(
        config=True,
        help="admission='kueue': {'high'|'normal'|'low': WorkloadPriorityClass} set on each Job as "
        "kueue.x-k8s.io/priority-class. Empty: Kueue's default priority.",
    )

    @validate("preempt_grace")
    def _check_grace(self, proposal: dict[str, Any]) -> float:
        if not proposal["value"] >= 0:
            raise TraitError("preempt_grace must be >= 0")
        return float(proposal["value"])

    def __init__(
        self,
        settings: KubernetesConfig | None = None,
        *,
        pod_customizer: PodCustomizer | None = None,
        api: Api | None = None,
        start: bool = True,
        **kwargs: Any,
    ):
        """Settings come from the traits (`KubernetesBackend(parent=app)` reads `c.KubernetesBackend.*`), or
        all at once from `settings`. `pod_customizer(job_manifest, spec, parameters)` may edit a Job before it
        is created (the tests and the benchmark set kwok's simulated run time from a parameter with it).
        With `start=False` nothing runs and nothing connects until `start()` (or the first API call)."""
        super().__init__(**kwargs)
        if settings is not None:
            self._show_settings(settings)
        self.cfg = settings if settings is not None else self._settings()
        self.pod_customizer = pod_customizer
        self._state = SharedState()
        self._conn = Connection(self.cfg, api)
        self._reported_nodes: dict[str, NodeSpec] = {}
        self._inventory_taken = False
        self._reconciler = Reconciler(self._state, self._conn, self.cfg, self._evaluate)
        selector = instance_selector(self.cfg.instance)
        self._watchers = [self._watcher("node", "/api/v1/nodes", None)]
        for ns in self.cfg.namespaces():
            self._watchers.append(self._watcher("job", f"/apis/batch/v1/namespaces/{ns}/jobs", selector))
            self._watchers.append(self._watcher("pod", f"/api/v1/namespaces/{ns}/pods", selector))
        self._kueue = KueueCache(self.cfg) if self.cfg.admission == "kueue" else None
        if self._kueue is not None:
            self._watchers += [self._watcher(kind, path, None) for kind, path in watch_paths(self.cfg)]
        self._podlogs = PodLogCopier(self._state, self._conn, self.cfg)
        self._threads = list(self._reconciler.threads)
        if self.cfg.copy_logs:
            self._threads.extend(self._podlogs.threads)
        self._started = False
        if start:
            self.start()

    # --- settings -----------------------------------------------------------------------------------
    def _settings(self) -> KubernetesConfig:
        """The traits, frozen."""
        values = {field: getattr(self, trait) for field, trait in SETTINGS.items()}
        values.update(
            tenant_namespaces=dict(self.tenant_namespaces),
            kueue_queues=dict(self.kueue_queues),
            kueue_priority_classes=dict(self.kueue_priority_classes),
            pools=tuple(self.allowed_pools),
            spot_pools=tuple(self.spot_pools),
            tolerations=tuple(dict(t) for t in self.tolerations),
            output_volume=dict(self.output_volume) or None,
            container_resources=dict(self.container_resources),
            ttl_after_finished=None if self.ttl_after_finished < 0 else self.ttl_after_finished,
        )
        return KubernetesConfig(**values)

    def _show_settings(self, cfg: KubernetesConfig) -> None:
        """Make the traits tell the truth about settings given as a KubernetesConfig."""
        for field, trait in SETTINGS.items():
            value = getattr(cfg, field)
            if field == "output_volume" and value is None:
                value = {}
            elif field == "ttl_after_finished" and value is None:
                value = -1
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, Mapping):
                value = dict(value)
            setattr(self, trait, value)

    # --- the API server ---------------------------------------------------------------------------------
    @property
    def api(self) -> Api:
        return self._conn.api

    @property
    def api_up(self) -> bool:
        return self._conn.up

    @api_up.setter
    def api_up(self, value: bool) -> None:
        self._conn.up = value

    @property
    def api_error(self) -> str:
        return self._conn.error

    @property
    def api_down_since(self) -> float | None:
        return self._conn.down_since

    @property
    def stats(self) -> dict[str, int]:
        """API calls made: creates, patches, deletes, retries, api_errors."""
        return self._conn.stats

    @property
    def log_stats(self) -> dict[str, int]:
        """The pod-log copy: fetches, fetch_errors, bytes fetched, in_flight and max_in_flight."""
        return dict(self._podlogs.stats)

    # --- lifecycle ----------------------------------------------------------------------------------
    def _watcher(self, kind: str, path: str, selector: str | None) -> Watcher:
        return Watcher(
            kind,
            path,
            selector,
            conn=self._conn,
            cfg=self.cfg,
            stopping=self._state.stopping,
            on_list=self._listed,
            on_event=self._changed,
        )

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._conn.api  # noqa: B018  (connect here, so a bad kubeconfig fails the caller, not a thread)
        for t in self._watchers + self._threads:
            t.start()
        self._watchers[0].synced.wait(self.cfg.sync_timeout)
        for w in self._watchers if self._kueue is not None else ():
            if w.kind in KUEUE_KINDS:  # the tenants are Kueue's queues: know them before the first submit
                w.synced.wait(self.cfg.sync_timeout)
        if not self._watchers[0].synced.is_set():
            log.warning(
                "the Kubernetes API server did not answer within %.0f s (%s); starting with no nodes",
                self.cfg.sync_timeout,
                self.api_error,
            )

    def wait_synced(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        for w in self._watchers:
            if not w.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def close(self) -> None:
        """Stop watching and writing. The Jobs keep running in the cluster (as they would through a restart of
        the service); the next backend adopts them (`adopt`). `delete_all_jobs` removes them."""
        self._state.stopping.set()
        with self._state.lock:
            self._reconciler.wake_all()
            self._podlogs.wake_all()
        for w in self._watchers:
            w.interrupt()
        for t in self._watchers + self._threads:
            if t.is_alive():
                t.join(timeout=5.0)
        self._conn.close()

    def delete_all_jobs(self, timeout: float = 120.0) -> int:
        """Delete every Job (and ConfigMap) of this instance, waiting for nothing. For tests and teardown."""
        selector = instance_selector(self.cfg.instance)
        n = 0
        for ns in self.cfg.namespaces():
            for kind in ("/apis/batch/v1/namespaces/{ns}/jobs", "/api/v1/namespaces/{ns}/configmaps"):
                self._conn.request(
                    "DELETE",
                    kind.format(ns=ns),
                    query={"labelSelector": selector, "propagationPolicy": "Background"},
                    timeout=(3.0, timeout),
                )
                n += 1
        return n

    # --- the protocol ---------------------------------------------------------------------------------
    def inventory(self) -> list[NodeSpec]:
        with self._state.lock:
            nodes = eligible_nodes(self._state.cache.nodes, self.cfg)
            self._reported_nodes = dict(nodes)
            self._inventory_taken = True
            return [nodes[n] for n in sorted(nodes)]

    def pools(self) -> list[Pool]:
        """Pools seen on the cluster's GPU nodes; spot where configured so or where a node has the spot taint.
        A pool's GPU type is its nodes' `gpu_product_label` (set by NVIDIA's GPU feature discovery) where
        they all agree; otherwise none (configure it in c.GPUSched.pools)."""
        with self._state.lock:
            return pools_of(self._state.cache.nodes, self.cfg)

    def launch(self, req: LaunchRequest) -> None:
        if self._state.stopping.is_set():
            raise BackendError("the kubernetes backend is closed")
        spec = req.spec or JobSpec(
            notebook=Path(req.notebook).name, gpus=max(1, len(req.gpu_ids)), max_runtime=req.max_runtime
        )
        allocation = tuple(req.allocation or ())
        per_node = 0
        if len(allocation) > 1:
            try:
                per_node = gpus_per_node(allocation)
            except GangError as exc:
                raise BackendError(f"job {req.job_id}: {exc}") from None
        try:
            params = validate_parameters(req.parameters)
        except ValueError as exc:
            raise BackendError(str(exc)) from None
        try:
            text = Path(req.notebook).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read the notebook {req.notebook}: {exc}") from None
        node = allocation[0][0] if allocation else None
        # The resource of the slot the core chose (a MIG profile's, or nvidia.com/gpu), whatever the gpu_type.
        resource = resource_for(split_node(node)[1], self.cfg) if node else None
        job, cm = build_manifests(
            req.job_id,
            spec,
            text,
            params,
            self.cfg,
            kernel_name=req.kernel_name,
            gpu_resource=resource,
            checkpoint_interval=req.checkpoint_interval,
            preempt_grace=req.preempt_grace,
        )
        service = make_gang(job, len(allocation), per_node, self.cfg) if per_node else None
        extras = [service] if service else []
        if self.pod_customizer is not None:
            self.pod_customizer(job, spec, params)
        st = self._state
        with st.lock:
            k8s_node, pool, spot = self._placement_of(node)
            t = st.tracked.get(req.job_id)
            if t is None:
                t = st.tracked[req.job_id] = Tracked(
                    req.job_id, job["metadata"]["name"], job["metadata"]["namespace"], "run"
                )
            if self._kueue is not None:
                kj = st.cache.jobs.get(req.job_id)
                # A Job Kueue preempted stays (Kueue admits it again); one going away is made afresh.
                t.recreate = kj is None or bool(kj["metadata"].get("deletionTimestamp")) or t.want == "delete"
                t.kueue, t.started_attempt = True, -1
            t.want = "run"
            t.name, t.namespace = job["metadata"]["name"], job["metadata"]["namespace"]
            t.node, t.pool, t.spot = k8s_node, pool, spot
            t.nodes = tuple(split_node(n)[0] for n, _ in allocation) if service else ()
            if self.cfg.upload_url:
                extras.append(add_upload(job, cm, req.job_id, new_token(), self.cfg))
            t.extras, t.extras_made = tuple(extras), False
            t.attempt = 1 if t.kueue else max(t.attempt, observed_attempt(st.cache.jobs.get(req.job_id))) + 1
            t.manifests = (job, cm)
            t.job_dir = Path(req.job_dir)
            t.reported_final = False
            t.backoff = 0.0
            self._reconciler.enqueue(req.job_id, 0.0)
        if t.kueue:
            st.note(t, f"queued in Kueue's LocalQueue {queue_name(spec.tenant, self.cfg)}; Job {t.namespace}/{t.name}")
            return
        where = f"{len(t.nodes)} nodes ({', '.join(t.nodes)})" if t.nodes else node or f"pool {pool}"
        st.note(t, f"admitted to {where} (attempt {t.attempt}); Job {t.namespace}/{t.name}")

    def kill(self, job_id: str, reason: str) -> None:
        delete = reason.lower().startswith("cancel")
        st = self._state
        with st.lock:
            t = st.tracked.get(job_id)
            # Under Kueue a stop of ours deletes the Job (suspending it would only have Kueue start it again);
            # after Kueue's own preemption (reported: want "done") the Job stays for Kueue to admit again.
            delete = delete or (t is not None and t.kueue and t.want != "done")
            if t is None:
                kj = st.cache.jobs.get(job_id)
                if kj is None:
                    return
                meta = kj["metadata"]
                t = st.tracked[job_id] = Tracked(job_id, meta["name"], meta["namespace"], "suspend")
            if t.want == "done" and not delete:
                return
            t.want = "delete" if delete else "suspend"
            t.backoff = 0.0
            self._reconciler.enqueue(job_id, 0.0)
        st.note(t, f"{'deleting' if delete else 'suspending'} the Job ({reason or 'no reason given'})")

    def poll(self) -> list[BackendUpdate]:
        now = time.time()
        st = self._state
        with st.lock:
            out: list[BackendUpdate] = []
            if self._inventory_taken and st.cache.nodes_dirty:
                st.cache.nodes_dirty = False
                out += node_news(st.cache.nodes, self._reported_nodes, self.cfg, now)
            out += st.updates
            st.updates = []
            if out and log.isEnabledFor(logging.DEBUG):
                for u in out:
                    log.debug("update %s %s %s", u.job_id or (u.node.name if u.node else ""), u.kind, u.message)
            for t in st.tracked.values():
                if (
                    t.want == "run"
                    and t.started_attempt == t.attempt
                    and now - t.last_beat >= self.cfg.heartbeat_interval
                ):
                    t.last_beat = now
                    out.append(BackendUpdate(t.job_id, "heartbeat", now, checkpoint_at=t.checkpoint_at))
            return out

    def running(self) -> set[str]:
        with self._state.lock:  # (a Job waiting in Kueue's line is not running)
            return {
                j for j, t in self._state.tracked.items() if t.want == "run" and (not t.kueue or t.started_attempt > 0)
            }

    def queue_status(self, job_id: str) -> tuple[int | None, str] | None:
        with self._state.lock:
            t = self._state.tracked.get(job_id)
            if self._kueue is None or t is None or not t.kueue:
                return None
            return self._kueue.status(t.namespace, t.name)

    def tenants(self) -> list[Tenant] | None:
        if self._kueue is None:
            return None
        with self._state.lock:
            return self._kueue.tenants(self.cfg.gpu_resource)

    def reap_orphan(self, job_dir: Path) -> bool:
        return False  # Jobs outlive the service by design: `adopt` takes them over instead

    def gpu_memory_used_mib(self) -> dict[tuple[str, int], float]:
        return {}

    def adopt(self, jobs: Mapping[str, tuple[JobState, Allocation]]) -> set[str]:
        """Reconcile after a restart. `jobs`: every job in the store -> (state, allocation). Active jobs are
        taken over as they are (they keep their GPUs); once the cluster has been listed, the reconciler
        resolves the differences (see `reconcile`)."""
        adopted: set[str] = set()
        st = self._state
        with st.lock:
            self._reconciler.begin_adoption(jobs)
            for job_id, (state, allocation) in jobs.items():
                if not state.holds_gpus:
                    continue
                node = allocation[0][0] if allocation else None
                k8s_node, pool, spot = self._placement_of(node)
                t = st.tracked.get(job_id) or Tracked(job_id, job_name(job_id), "", "run")
                t.want, t.node, t.pool, t.spot, t.adopted = "run", k8s_node, pool, spot, True
                t.kueue = self._kueue is not None  # (so a later preemption by Kueue is seen as one)
                t.nodes = tuple(split_node(n)[0] for n, _ in allocation) if len(allocation) > 1 else ()
                t.attempt = max(t.attempt, observed_attempt(st.cache.jobs.get(job_id)))
                if state is JobState.RUNNING:
                    # Believed running until the cluster says otherwise: it keeps its heartbeats even while
                    # the API server cannot be reached.
                    t.started_attempt, t.last_beat = t.attempt, time.time()
                st.tracked[job_id] = t
                adopted.add(job_id)
            self._reconciler.finish_adoption(self._jobs_listed())
        return adopted

    def upload_allowed(self, job_id: str, token: str) -> bool:
        """Is `token` this job's upload token, and is the job still running (as far as the service knows)?"""
        with self._state.lock:
            t = self._state.tracked.get(job_id)
            if t is None or t.want != "run" or t.reported_final:
                return False
            # This launch's token (its manifests), else the Job's (an adopted job)
            kj = t.manifests[0] if t.manifests else self._state.cache.jobs.get(job_id)
            stored = ((kj or {}).get("metadata") or {}).get("annotations", {}).get(A_TOKEN_HASH)
            return token_matches(token, stored)

    def job_dirs(self, dirs: Mapping[str, Path]) -> None:
        """The adopted jobs' folders: their pods' logs are copied on into log.txt, from where the previous
        service stopped (see `podlogs.POSITIONS`)."""
        with self._state.lock:
            for job_id, job_dir in dirs.items():
                t = self._state.tracked.get(job_id)
                if t is None or not t.adopted or t.job_dir is not None:
                    continue
                t.job_dir = Path(job_dir)
                for pod in list((self._state.cache.pods.get(job_id) or {}).values()):
                    self._podlogs.seen(job_id, pod)  # (pods listed before the folder was known)

    def check(self, spec: JobSpec, notebook: Path, parameters: Mapping[str, Any] | None = None) -> None:
        """Ask the API server (server-side dry run) whether it would accept this job's Job and ConfigMap.
        Raises BackendError with the API server's own message when it would not. Skipped (accepted) while the
        API server is unreachable: the job is then checked when it is created."""
        largest = max((n.gpus for n in self.inventory()), default=0)
        if self._kueue is not None and largest and spec.gpus > largest:
            raise BackendError(f"with admission by Kueue a job runs as one pod: ask for at most {largest} GPUs")
        if not self.api_up or not self.cfg.dry_run_on_submit:
            return
        try:
            text = Path(notebook).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read the notebook {notebook}: {exc}") from None
        job, cm = build_manifests(
            "dry-run-" + digest(str(time.time_ns())), spec, text, dict(parameters or {}), self.cfg
        )
        if self.pod_customizer is not None:
            self.pod_customizer(job, spec, dict(parameters or {}))
        ns = job["metadata"]["namespace"]
        for path, body in ((f"/api/v1/namespaces/{ns}/configmaps", cm), (f"/apis/batch/v1/namespaces/{ns}/jobs", job)):
            try:
                self._conn.request("POST", path, body=body, query={"dryRun": "All"}, timeout=(2.0, 5.0))
            except KubeApiError as exc:
                if exc.transient or exc.status in (401, 403):
                    return  # cannot tell now; the real create reports it
                raise BackendError(rejection(exc, body)) from None

    # --- what the watchers found (watcher threads) ----------------------------------------------------------
    def _listed(self, kind: str, path: str, items: list[dict]) -> None:
        with self._state.lock:
            if self._kueue is not None and kind in KUEUE_KINDS:
                return self._kueue.relisted(kind, path, items)
            self._act_on(self._state.cache.relisted(kind, path, items))

    def _changed(self, kind: str, etype: str, obj: dict) -> None:
        with self._state.lock:
            if self._kueue is not None and kind in KUEUE_KINDS:
                return self._kueue.changed(kind, etype, obj)
            self._act_on(self._state.cache.changed(kind, etype, obj))

    def _act_on(self, changes: Changes) -> None:
        for job_id, pod, gone in changes.pods:
            self._podlogs.seen(job_id, pod, gone)
        for job_id in changes.jobs:
            self._evaluate(job_id)
        if changes.jobs_listed:
            self._reconciler.finish_adoption(self._jobs_listed())

    def _jobs_listed(self) -> bool:
        """Have the Jobs of every namespace been listed (lock held)?"""
        return all(w.path in self._state.cache.listed for w in self._watchers if w.kind == "job")

    def _evaluate(self, job_id: str) -> None:
        """Turn what the caches show about one job into news for the service (lock held)."""
        st = self._state
        t = st.tracked.get(job_id)
        if t is None or t.want != "run" or t.reported_final:
            return
        now = time.time()
        pods = st.cache.pods.get(job_id) or {}
        verdict = evaluate(t, st.cache.jobs.get(job_id), pods, pin_nodes=self.cfg.pin_nodes, now=now)
        if verdict is None:
            return
        if verdict.want:
            t.want, t.reported_final = verdict.want, True
        if verdict.recheck:
            self._reconciler.enqueue(job_id, 0.0)
        if verdict.kind is not None:
            message, where = verdict.message, None
            if t.kueue and self._kueue is not None:
                if verdict.kind == "started":
                    where = kueue_placed(pods.values(), self.cfg.gpu_resource)
                elif verdict.kind == "preempted":
                    why = self._kueue.evicted(t.namespace, t.name)
                    message = f"{message}: {why}" if why else message
            st.updates.append(BackendUpdate(job_id, verdict.kind, now, message, placed=where))
        if verdict.note:
            st.note(t, verdict.note)

    def _placement_of(self, node: str | None) -> tuple[str | None, str | None, bool]:
        return placement_of(node, self._state.cache.nodes, self._reported_nodes, self.cfg)
