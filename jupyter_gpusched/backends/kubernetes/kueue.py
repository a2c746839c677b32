"""Admission handed to an existing Kueue (`c.KubernetesBackend.admission = "kueue"`).

Each job's Job is created suspended with `kueue.x-k8s.io/queue-name` (its tenant's LocalQueue) and nothing
else is done to it: Kueue admits it against its ClusterQueue's quota and unsuspends it, the kube-scheduler
binds its pod, and the backend reports it started where the pod runs (service/handover.py books that). Kueue
suspending a running Job (its preemption) is reported as `preempted`; the Job stays, so Kueue admits it again
in its turn. What the backend reads from Kueue, through watches like its other caches:
- Workloads (one per Job): why a job waits (Kueue's `QuotaReserved` message) and its place in line, counted
  as Kueue orders a ClusterQueue (priority, then creation time);
- LocalQueues and ClusterQueues: each LocalQueue of the job namespaces is a tenant of the same name (or the
  one `kueue_queues` maps to it), with its ClusterQueue's nominal GPU quota, and as burst its borrowing
  limit (none: unlimited in a cohort; 0 outside one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ...core.model import JobSpec, Tenant
from .config import KubernetesConfig
from .names import A_ATTEMPT, label_value
from .nodefacts import MIG_PREFIX, int_or_none
from .status import cond_true

KUEUE_API = "/apis/kueue.x-k8s.io/v1beta2"  # Kueue v0.15's own version (v1beta1 is converted by its webhook)
L_QUEUE = "kueue.x-k8s.io/queue-name"
L_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
KINDS = ("workload", "localqueue", "clusterqueue")


def watch_paths(cfg: KubernetesConfig) -> list[tuple[str, str]]:
    """(kind, path) of every Kueue list the backend watches."""
    out = [("clusterqueue", f"{KUEUE_API}/clusterqueues")]
    for ns in cfg.namespaces():
        out.append(("workload", f"{KUEUE_API}/namespaces/{ns}/workloads"))
        out.append(("localqueue", f"{KUEUE_API}/namespaces/{ns}/localqueues"))
    return out


def queue_name(tenant: str, cfg: KubernetesConfig) -> str:
    return cfg.kueue_queues.get(tenant) or label_value(tenant)


def make_kueue_job(job: dict[str, Any], spec: JobSpec, cfg: KubernetesConfig) -> None:
    """Turn a suspended Job into one that Kueue admits: its LocalQueue (and priority class) as labels, and
    attempt 1 for good (Kueue, not us, unsuspends it; after a preemption the same Job runs again)."""
    labels = job["metadata"].setdefault("labels", {})
    labels[L_QUEUE] = queue_name(spec.tenant, cfg)
    priority_class = cfg.kueue_priority_classes.get(str(spec.priority.name).lower())
    if priority_class:
        labels[L_PRIORITY_CLASS] = priority_class
    job["spec"]["template"]["metadata"].setdefault("annotations", {})[A_ATTEMPT] = "1"


def placed(pods: Iterable[Mapping], gpu_resource: str) -> dict[str, int]:
    """Node -> GPUs that the running pods among `pods` hold there."""
    out: dict[str, int] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp") or (pod.get("status") or {}).get("phase") != "Running":
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            continue
        gpus = 0
        for c in (pod.get("spec") or {}).get("containers") or ():
            limits = (c.get("resources") or {}).get("limits") or {}
            gpus += sum(_count(v) for k, v in limits.items() if k == gpu_resource or k.startswith(MIG_PREFIX))
        out[node] = out.get(node, 0) + gpus
    return out


def _count(value: Any) -> int:
    return int_or_none(value) or 0


def _cond(obj: Mapping, ctype: str) -> Mapping | None:
    """The object's condition of type `ctype`, whatever its status (`status.cond_true`: only a true one)."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype:
            return c
    return None


class KueueCache:
    """Kueue's objects as the watches last showed them. Not thread-safe: the backend holds its lock."""

    def __init__(self, cfg: KubernetesConfig):
        self.cfg = cfg
        self.workloads: dict[tuple[str, str], dict] = {}  # (namespace, Job name) -> Workload
        self.local_queues: dict[tuple[str, str], dict] = {}  # (namespace, name) -> LocalQueue
        self.cluster_queues: dict[str, dict] = {}
        self._order: dict[tuple[str, str], int] | None = None  # (namespace, Job name) -> place in line
        self._stores: dict[str, dict[Any, dict]] = {
            "workload": self.workloads,
            "localqueue": self.local_queues,
            "clusterqueue": self.cluster_queues,
        }

    def relisted(self, kind: str, path: str, items: list[dict]) -> None:
        ns = path.split("/namespaces/")[1].split("/")[0] if "/namespaces/" in path else None
        store = self._stores[kind]
        for key in [k for k in store if ns is None or (isinstance(k, tuple) and k[0] == ns)]:
            del store[key]
        for obj in items:
            key = self._key(kind, obj)
            if key is not None:
                store[key] = obj
        self._order = None

    def changed(self, kind: str, etype: str, obj: dict) -> None:
        key = self._key(kind, obj)
        if key is None:
            return
        store = self._stores[kind]
        if etype == "DELETED":
            store.pop(key, None)
        else:
            store[key] = obj
        self._order = None

    @staticmethod
    def _key(kind: str, obj: Mapping) -> Any:
        meta = obj["metadata"]
        if kind == "clusterqueue":
            return meta["name"]
        if kind == "localqueue":
            return (meta.get("namespace", ""), meta["name"])
        owner = next((o for o in meta.get("ownerReferences") or () if o.get("kind") == "Job"), None)
        return None if owner is None else (meta.get("namespace", ""), owner["name"])

    # --- what the service asks ------------------------------------------------------------------------
    def status(self, namespace: str, job_name: str) -> tuple[int | None, str]:
        """A queued job's place in its ClusterQueue's line (0 = next, as the core counts) and why it waits."""
        wl = self.workloads.get((namespace, job_name))
        if wl is None:
            return None, "waiting for Kueue to take the Job in"
        if cond_true(wl, "QuotaReserved"):
            return None, f"admitted by Kueue ({self._cluster_queue(wl) or 'its ClusterQueue'}); waiting for its pod"
        if self._order is None:
            self._order = self._line()
        cond = _cond(wl, "QuotaReserved")
        why = (cond or {}).get("message") or f"waiting in Kueue's LocalQueue {wl['spec'].get('queueName', '?')}"
        return self._order.get((namespace, job_name)), f"Kueue: {why}"

    def evicted(self, namespace: str, job_name: str) -> str:
        """Why Kueue last evicted or preempted this job's Workload ("" when it says nothing)."""
        wl = self.workloads.get((namespace, job_name)) or {}
        for ctype in ("Preempted", "Evicted"):
            cond = cond_true(wl, ctype)
            if cond is not None:
                return str(cond.get("message") or cond.get("reason") or "")
        return ""

    def _cluster_queue(self, wl: Mapping) -> str | None:
        lq = self.local_queues.get((wl["metadata"].get("namespace", ""), (wl.get("spec") or {}).get("queueName", "")))
        return None if lq is None else (lq.get("spec") or {}).get("clusterQueue")

    def _line(self) -> dict[tuple[str, str], int]:
        """Every pending Workload's place in its ClusterQueue: higher priority first, then older first."""
        lines: dict[str | None, list[tuple[int, str, tuple[str, str]]]] = {}
        for key, wl in self.workloads.items():
            if cond_true(wl, "QuotaReserved") or cond_true(wl, "Finished"):
                continue
            priority = -int((wl.get("spec") or {}).get("priority") or 0)
            lines.setdefault(self._cluster_queue(wl), []).append((priority, wl["metadata"]["creationTimestamp"], key))
        return {key: i for line in lines.values() for i, (_, _, key) in enumerate(sorted(line))}

    def tenants(self, gpu_resource: str) -> list[Tenant]:
        """A tenant per LocalQueue in the job namespaces, on its ClusterQueue's GPU quota."""
        names = {q: t for t, q in self.cfg.kueue_queues.items()}
        out: dict[str, Tenant] = {}
        for (_, lq_name), lq in sorted(self.local_queues.items()):
            cq = self.cluster_queues.get((lq.get("spec") or {}).get("clusterQueue", ""))
            if cq is None:
                continue
            nominal, borrow, unlimited = 0, 0, False
            for group in (cq.get("spec") or {}).get("resourceGroups") or ():
                for flavor in group.get("flavors") or ():
                    for res in flavor.get("resources") or ():
                        if res.get("name") != gpu_resource:
                            continue
                        nominal += _count(res.get("nominalQuota", 0))
                        if res.get("borrowingLimit") is None:
                            unlimited = True
                        else:
                            borrow += _count(res["borrowingLimit"])
            if not ((cq.get("spec") or {}).get("cohortName") or (cq.get("spec") or {}).get("cohort")):
                burst: int | None = 0  # no cohort: nothing to borrow from
            else:
                burst = None if unlimited else borrow
            name = names.get(lq_name, lq_name)
            out.setdefault(name, Tenant(name, nominal, burst))
        return list(out.values())
