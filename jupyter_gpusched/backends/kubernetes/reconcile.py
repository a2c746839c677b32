"""Reconcile: drive each job's Job towards what the service last asked, and the store with the cluster.

A small pool of worker threads takes job ids off a due-time queue and moves each job's Job one step towards
what the service wants (run on node N / suspended / deleted): create it (suspended, with its ConfigMap), patch
it (admission, preemption), delete it. API failures (connection refused, 409, 429, 5xx) are retried with
backoff; a refusal (400, 403, 404, 422) fails the job with the API server's own message.

**Preemption** sets `suspend: true` (the Job controller deletes the pod without counting a failure) and
clears `status.startTime`, so the next admission may place it elsewhere. **Cancel** deletes the Job with
background propagation (pods and ConfigMap go too). A failed Job that is admitted again is deleted and
created afresh, and so is a gang's Job one of whose ranks had finished (all ranks must run again).

**After a restart** (`begin_adoption` / `finish_adoption`), once every namespace's Jobs are listed: an active
job with no Job is reported `preempted` (requeued without using a retry), a Job that finished while the
service was down reports succeeded/failed, a Job of a queued job is suspended, of a finished or cancelled job
deleted (unless finished), and a Job with no store row is deleted.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping

from ...core.model import Allocation, JobState
from .api import Connection, KubeApiError, rejection
from .config import KubernetesConfig
from .gang import gang_placement
from .manifests import placement_patch
from .names import A_JOB_ID
from .nodefacts import gpu_limits
from .state import SharedState, Tracked
from .status import cond_true, observed_attempt
from .upload import A_TOKEN_HASH

log = logging.getLogger(__name__)


class Reconciler:
    def __init__(self, state: SharedState, conn: Connection, cfg: KubernetesConfig, evaluate: Callable[[str], None]):
        """`evaluate(job_id)` turns the caches into news for one job (called with the lock held)."""
        self._state = state
        self._conn = conn
        self.cfg = cfg
        self._evaluate = evaluate
        self._wake = threading.Condition(state.lock)
        self._queue: list[tuple[float, int, str]] = []
        self._queued: dict[str, float] = {}
        self._inflight: set[str] = set()
        self._seq = itertools.count()
        self._adoption: dict[str, tuple[JobState, Allocation]] | None = None  # job id -> (state, allocation)
        self._adoption_done = False
        self.threads = [
            threading.Thread(target=self._work_loop, name=f"gpusched-k8s-worker-{i}", daemon=True)
            for i in range(max(1, cfg.workers))
        ]

    def wake_all(self) -> None:
        """On close: let every worker see that it should stop (lock held)."""
        self._wake.notify_all()

    # --- after a restart ----------------------------------------------------------------------------------
    def begin_adoption(self, jobs: Mapping[str, tuple[JobState, Allocation]]) -> None:
        """`jobs`: every job in the store -> (state, allocation). Lock held."""
        self._adoption = dict(jobs)
        self._adoption_done = False

    def finish_adoption(self, jobs_listed: bool) -> None:
        """Once Jobs are listed in every namespace (`jobs_listed`), resolve store vs cluster (lock held)."""
        if self._adoption is None or self._adoption_done or not jobs_listed:
            return
        self._adoption_done = True
        st = self._state
        for job_id, (state, _alloc) in self._adoption.items():
            t = st.tracked.get(job_id)
            if state.holds_gpus and t is not None and t.adopted and t.want == "run":
                if job_id not in st.cache.jobs and t.manifests is None:
                    st.report(t, "preempted", "its Kubernetes Job was gone after the restart; requeued")
                else:
                    self._evaluate(job_id)
                    self.enqueue(job_id, 0.0)  # make sure it is admitted where the store says
        for job_id, kj in list(st.cache.jobs.items()):
            if job_id in st.tracked:
                continue
            stored = self._adoption.get(job_id, (None, ()))[0]
            meta = kj["metadata"]
            finished = cond_true(kj, "Complete") or cond_true(kj, "Failed")
            if stored is None or (stored.terminal and not finished) or stored is JobState.CANCELLED:
                want = "delete"
            elif (
                stored in (JobState.QUEUED, JobState.PREEMPTED, JobState.LOST)
                and not kj["spec"].get("suspend")
                and self.cfg.admission != "kueue"  # (Kueue admitted it: the hand-over takes it up again)
            ):
                want = "suspend"
            else:
                continue
            log.warning(
                "reconcile: %s Job %s/%s of %s job %s",
                "deleting" if want == "delete" else "suspending",
                meta["namespace"],
                meta["name"],
                stored.value if stored else "unknown",
                job_id,
            )
            st.tracked[job_id] = Tracked(job_id, meta["name"], meta["namespace"], want)
            self.enqueue(job_id, 0.0)

    # --- the work queue ----------------------------------------------------------------------------------
    def enqueue(self, job_id: str, delay: float) -> None:
        """Look at this job's Job in `delay` seconds (or sooner, if already due sooner). Lock held."""
        due = time.monotonic() + delay
        old = self._queued.get(job_id)
        if old is not None and old <= due:
            return
        self._queued[job_id] = due
        heapq.heappush(self._queue, (due, next(self._seq), job_id))
        self._wake.notify()

    def _work_loop(self) -> None:
        while not self._state.stopping.is_set():
            with self._state.lock:
                job_id = None
                while job_id is None and not self._state.stopping.is_set():
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
                            self.enqueue(jid, 0.05)
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
            except KubeApiError as exc:
                self._conn.failed(exc)
                self._conn.stats["retries"] += 1
                with self._state.lock:
                    t = self._state.tracked.get(job_id)
                    if t is not None:
                        t.backoff = min(max(t.backoff * 2, 0.2), self.cfg.max_backoff)
                        retry = max(t.backoff, exc.retry_after or 0.0)
                if exc.status not in (0, 409):
                    log.warning(
                        "job %s: Kubernetes API error %s (%s); retrying in %.1f s",
                        job_id,
                        exc.status,
                        exc.message,
                        retry or 0,
                    )
            except Exception:
                log.exception("job %s: unexpected error talking to Kubernetes; retrying", job_id)
                retry = self.cfg.max_backoff
            finally:
                with self._state.lock:
                    self._inflight.discard(job_id)
                    if retry is not None and not self._state.stopping.is_set():
                        self.enqueue(job_id, retry)

    def _sync(self, job_id: str) -> float | None:
        """Move one job's Job one step towards what the service wants. Returns a delay to look again, or None."""
        with self._state.lock:
            t = self._state.tracked.get(job_id)
            if t is None:
                return None
            want, kj = t.want, self._state.cache.jobs.get(job_id)
            if not t.namespace and kj is not None:
                t.namespace, t.name = kj["metadata"]["namespace"], kj["metadata"]["name"]
            ns, name, node, pool, spot, attempt = t.namespace, t.name, t.node, t.pool, t.spot, t.attempt
            manifests, recreate, seen = t.manifests, t.recreate, t.seen and not t.recreate
            gang_nodes, extras = t.nodes, (() if t.extras_made else t.extras)
            kueue = t.kueue
        if not ns:
            return None  # adopted job whose Job we have not seen: the adoption pass reports it
        jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        job_path = f"{jobs_path}/{name}"
        if want == "done":
            return None
        if want == "delete":
            try:
                self._conn.request("DELETE", job_path, query={"propagationPolicy": "Background"})
                self._conn.stats["deletes"] += 1
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
            self._delete_configmap(ns, name)
            with self._state.lock:
                if t.want == "delete":
                    t.want = "done"
            return None
        log.debug(
            "job %s: sync want=%s job=%s",
            job_id,
            want,
            "none" if kj is None else f"suspend={kj['spec'].get('suspend')} attempt={observed_attempt(kj)}/{attempt}",
        )
        if want == "suspend":
            if kj is None or kj["metadata"].get("deletionTimestamp"):
                return None
            if cond_true(kj, "Complete") or cond_true(kj, "Failed"):
                return None
            if not kj["spec"].get("suspend"):
                self._patch(job_path, {"spec": {"suspend": True}})
            self._clear_start_time(job_path)
            return None
        # want == "run"
        if kj is not None and kj["metadata"].get("deletionTimestamp"):
            return 0.3  # an earlier incarnation is still going away
        if kj is not None and (
            cond_true(kj, "Failed")
            and (recreate or (manifests is not None and observed_attempt(kj) < attempt))
            # Placed on another kind of GPU (a MIG slice <-> whole GPUs): a Job's resources cannot be changed.
            or (manifests is not None and gpu_limits(kj) != gpu_limits(manifests[0]))
            # A gang runs again with all its ranks: an Indexed Job would skip the ranks an earlier attempt finished.
            or (
                manifests is not None
                and len(gang_nodes) > 1
                and observed_attempt(kj) < attempt
                and bool((kj.get("status") or {}).get("succeeded"))
            )
        ):
            with self._state.lock:
                t.recreate = True
            try:
                self._conn.request("DELETE", job_path, query={"propagationPolicy": "Background"})
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
            return 0.3
        if kj is None and seen:
            try:
                kj = self._conn.request("GET", job_path)
            except KubeApiError as exc:
                if exc.status != 404:
                    raise
                with self._state.lock:
                    if t.want == "run" and not t.reported_final and job_id not in self._state.cache.jobs:
                        self._state.report(t, "lost", f"the Kubernetes Job {ns}/{name} was deleted")
                return None
            with self._state.lock:
                self._state.cache.jobs.setdefault(job_id, kj)
        if kj is None:
            if manifests is None:
                return None
            job = self._create(jobs_path, job_path, ns, name, manifests)
            if job is None:
                return None  # refused: reported as failed
            with self._state.lock:
                t.recreate = False
                t.seen = True
                t.extras_made = False  # (a Job made afresh: what the old one owned went with it)
                extras = t.extras
                if job_id not in self._state.cache.jobs:
                    self._state.cache.jobs[job_id] = job
            kj = job
        if cond_true(kj, "Complete"):
            with self._state.lock:
                self._evaluate(job_id)
            return None
        if kueue:
            return None  # Kueue unsuspends it in its turn
        current = observed_attempt(kj)
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
        for extra in extras:  # before the pods exist: they need them
            self._create_owned(kj, f"/api/v1/namespaces/{ns}/{extra['kind'].lower()}s", extra)
        if extras:
            with self._state.lock:
                t.extras_made = True
        if (kj.get("status") or {}).get("startTime"):
            self._clear_start_time(job_path)
        log.debug("job %s: admitting attempt %d on %s (pool %s)", job_id, attempt, node, pool)
        try:
            patch = placement_patch(node, pool, spot, attempt, self.cfg)
            if len(gang_nodes) > 1:
                patch = gang_placement(patch, gang_nodes, job_id)
            token_hash = (manifests[0]["metadata"]["annotations"] if manifests else {}).get(A_TOKEN_HASH)
            if token_hash:  # the hash of the token just put in the Secret
                patch["metadata"] = {"annotations": {A_TOKEN_HASH: token_hash}}
            self._patch(job_path, patch)
        except KubeApiError as exc:
            if exc.status == 422 and "immutable" in exc.message:
                # The Job controller has not caught up with the suspension yet: clear and try again shortly.
                self._clear_start_time(job_path)
                return 0.2
            if exc.status in (400, 422, 403, 404):
                self._refused(job_id, exc, "admitting")
                return None
            raise
        with self._state.lock:
            t.backoff = 0.0
        return None

    def _live_pods(self, job_id: str) -> list[str]:
        """Pods of the job that are neither finished nor being deleted (from the cache)."""
        with self._state.lock:
            return [
                name
                for name, pod in (self._state.cache.pods.get(job_id) or {}).items()
                if not pod["metadata"].get("deletionTimestamp")
                and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]

    def _patch(self, path: str, body: dict) -> dict:
        self._conn.stats["patches"] += 1
        return self._conn.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def _clear_start_time(self, job_path: str) -> None:
        try:
            self._conn.request(
                "PATCH",
                job_path + "/status",
                body={"status": {"startTime": None}},
                content_type="application/merge-patch+json",
            )
        except KubeApiError as exc:
            if exc.status not in (404, 422):
                raise

    def _create(self, jobs_path: str, job_path: str, ns: str, name: str, manifests: tuple[dict, dict]) -> dict | None:
        job_manifest, cm_manifest = manifests
        try:
            job = self._conn.request("POST", jobs_path, body=job_manifest)
            self._conn.stats["creates"] += 1
        except KubeApiError as exc:
            if exc.status == 409:
                job = self._conn.request("GET", job_path)
                if (job.get("metadata") or {}).get("deletionTimestamp"):
                    raise  # the old one is still being deleted: retry
                if (job["metadata"].get("annotations") or {}).get(A_JOB_ID) != job_manifest["metadata"]["annotations"][
                    A_JOB_ID
                ]:
                    self._refused(
                        job_manifest["metadata"]["annotations"][A_JOB_ID],
                        KubeApiError(409, f"a Job named {ns}/{name} already exists and belongs to something else"),
                        "creating",
                    )
                    return None
            elif exc.status in (400, 403, 404, 422):
                self._refused(job_manifest["metadata"]["annotations"][A_JOB_ID], exc, "creating", job_manifest)
                return None
            else:
                raise
        cm = json.loads(json.dumps(cm_manifest))
        cm["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": name,
                "uid": job["metadata"]["uid"],
                "blockOwnerDeletion": False,
            }
        ]
        cm_path = f"/api/v1/namespaces/{ns}/configmaps"
        try:
            self._conn.request("POST", cm_path, body=cm)
        except KubeApiError as exc:
            if exc.status == 409:
                self._conn.request("PUT", f"{cm_path}/{name}", body=cm)
            elif exc.status in (400, 403, 404, 422):
                self._refused(job_manifest["metadata"]["annotations"][A_JOB_ID], exc, "creating", cm)
                try:
                    self._conn.request("DELETE", job_path, query={"propagationPolicy": "Background"})
                except KubeApiError:
                    pass
                return None
            else:
                raise
        return job

    def _create_owned(self, job: Mapping, path: str, manifest: Mapping) -> None:
        """Create an object the Job owns (the garbage collector deletes it with the Job); one that exists is kept."""
        body = json.loads(json.dumps(manifest))
        meta = job["metadata"]
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": meta["name"],
                "uid": meta["uid"],
                "blockOwnerDeletion": False,
            }
        ]
        try:
            self._conn.request("POST", path, body=body)
        except KubeApiError as exc:
            if exc.status != 409:
                raise
            if body["kind"] == "Secret":  # this launch's upload token replaces the last one
                self._conn.request("PUT", f"{path}/{body['metadata']['name']}", body=body)

    def _delete_configmap(self, ns: str, name: str) -> None:
        try:
            self._conn.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/{name}")
        except KubeApiError as exc:
            if exc.status != 404:
                raise

    def _refused(self, job_id: str, exc: KubeApiError, doing: str, body: Mapping | None = None) -> None:
        message = rejection(exc, body)
        log.warning("job %s: %s", job_id, message)
        with self._state.lock:
            t = self._state.tracked.get(job_id)
            if t is None or t.reported_final:
                return
            self._state.report(t, "failed", message)
        self._state.note(t, message)
