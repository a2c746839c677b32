"""What the cached Nodes, Jobs and Pods mean for the service: capacity, and news of each job.

Pure functions over the watchers' caches (no I/O, no locks; the caller holds the backend's lock):

- a GPU node is capacity of its pool (`nodefacts.gpu_slots`: a MIG profile of a node is a node of its own); nodes that come and go become `node_added` /
  `node_lost` news (`node_news`);
- a job's Job and pods become one `Verdict` (`evaluate`): started (a pod of the current attempt Running on
  the chosen node), succeeded (`Complete`), failed (the notebook's own error: its container exited non-zero,
  or `max_runtime` passed), lost (its pod failed through no fault of the notebook: rejected or killed by the
  node without a container error; the service re-runs it while `max_retries` allow), preempted (its pod was
  evicted or disrupted: requeued without using a retry, as when the scheduler preempts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from ...core.model import NodeSpec, Pool
from ..base import BackendUpdate, UpdateKind
from ..exitrecord import EXIT_NOT_STARTED
from .config import KubernetesConfig
from .names import A_ATTEMPT
from .nodefacts import gpu_slots, split_node
from .state import Tracked

T = TypeVar("T")


def cond_true(obj: Mapping, ctype: str) -> Mapping | None:
    """The object's condition of type `ctype` when its status is "True", else None."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def observed_attempt(kj: Mapping | None) -> int:
    """The attempt a Job was last admitted as (its pod template's annotation); 0: never admitted."""
    if kj is None:
        return 0
    ann = ((kj["spec"].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    try:
        return int(ann.get(A_ATTEMPT, 0))
    except ValueError:
        return 0


# --- nodes ------------------------------------------------------------------------------------------------
def eligible_nodes(nodes: Mapping[str, Mapping], cfg: KubernetesConfig) -> dict[str, NodeSpec]:
    """The core's nodes: one per GPU resource of each usable Node (`nodefacts.gpu_slots`)."""
    out = {}
    for node in nodes.values():
        for slot in gpu_slots(node, cfg):
            out[slot.name] = NodeSpec(slot.name, slot.gpus, slot.pool)
    return out


def placement_of(
    node: str | None, nodes: Mapping[str, Mapping], reported: Mapping[str, NodeSpec], cfg: KubernetesConfig
) -> tuple[str | None, str | None, bool]:
    """(Kubernetes Node, its pool label value, spot) of one of the core's nodes, from the cache, else from what
    was last reported of it."""
    if node is None:
        return None, None, False
    name = split_node(node)[0]
    obj = nodes.get(name)
    slot = next((s for s in gpu_slots(obj, cfg) if s.name == node), None) if obj is not None else None
    if slot is None:
        spec = reported.get(node)
        pool = split_node(spec.pool)[0] if spec else None
        return name, pool, (spec.pool in cfg.spot_pools or pool in cfg.spot_pools) if spec else False
    return name, slot.node_pool, slot.spot


def node_news(
    nodes: Mapping[str, Mapping], reported: dict[str, NodeSpec], cfg: KubernetesConfig, now: float
) -> list[BackendUpdate]:
    """node_lost / node_added news since `reported`, which is brought up to date."""
    current = eligible_nodes(nodes, cfg)
    pools = {p.name: p for p in pools_of(nodes, cfg)}  # (a pool new to the service comes with its facts)
    out = []
    for name, spec in sorted(reported.items()):
        if current.get(name) != spec:
            out.append(BackendUpdate("", "node_lost", now, f"node {name} went away", node=spec))
            del reported[name]
    for name, spec in sorted(current.items()):
        if name not in reported:
            pool = pools.get(spec.pool) or Pool(spec.pool, spot=placement_of(name, nodes, reported, cfg)[2])
            out.append(BackendUpdate("", "node_added", now, f"node {name} joined", node=spec, pool=pool))
            reported[name] = spec
    return out


def _agreed(values: set[T]) -> T | None:
    """The one value all agree on, or None."""
    return next(iter(values)) if len(values) == 1 else None


def pools_of(nodes: Mapping[str, Mapping], cfg: KubernetesConfig) -> list[Pool]:
    """Pools seen on the GPU nodes: spot where configured so or where a node has the spot taint; a pool's GPU
    type, memory per GPU and GPUs per node are its nodes' (GPU feature discovery's labels, a MIG slice's
    profile) where they all agree."""
    spot: dict[str, bool] = {}
    types: dict[str, set[str | None]] = {}
    memories: dict[str, set[int | None]] = {}
    counts: dict[str, set[int | None]] = {}
    for node in nodes.values():
        for slot in gpu_slots(node, cfg):
            spot[slot.pool] = spot.get(slot.pool, False) or slot.spot
            types.setdefault(slot.pool, set()).add(slot.gpu_type)
            memories.setdefault(slot.pool, set()).add(slot.memory_mib)
            counts.setdefault(slot.pool, set()).add(slot.count)
    return [
        Pool(
            p,
            spot=s,
            gpu_type=_agreed(types[p]),
            gpu_memory_mib=_agreed(memories[p]),
            node_gpus=_agreed(counts[p]),
        )
        for p, s in sorted(spot.items())
    ]


# --- jobs -------------------------------------------------------------------------------------------------
def _exit_detail(pod: Mapping) -> str:
    """ "exit code 1 (Error)" for a pod whose container exited non-zero, else ""."""
    detail = ""
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        term = (cs.get("state") or {}).get("terminated")
        if term and term.get("exitCode"):
            detail = f"exit code {term['exitCode']}" + (
                f" ({term.get('reason') or ''}{': ' + term['message'] if term.get('message') else ''})"
                if term.get("reason") or term.get("message")
                else ""
            )
    return detail


def _exited_with(pods: Mapping[str, Mapping], attempt: int, code: int) -> bool:
    """Did a container of the attempt's pods exit with `code`?"""
    for pod in pods.values():
        if (pod["metadata"].get("annotations") or {}).get(A_ATTEMPT) != str(attempt):
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or ():
            if ((cs.get("state") or {}).get("terminated") or {}).get("exitCode") == code:
                return True
    return False


def _by_age(pods: Mapping[str, Mapping]) -> list[Mapping]:
    return sorted(pods.values(), key=lambda p: p["metadata"].get("creationTimestamp") or "")


def failure_message(kj: Mapping, pods: Mapping[str, Mapping], cond: Mapping) -> str:
    """Why a Job failed: its condition, and the last pod's exit code."""
    reason, message = cond.get("reason") or "Failed", cond.get("message") or ""
    if reason == "DeadlineExceeded":
        secs = kj["spec"].get("activeDeadlineSeconds")
        return f"max_runtime exceeded ({secs} s)"
    detail = ""
    for pod in _by_age(pods):
        detail = _exit_detail(pod) or detail
    text = f"{reason}: {message}" if message else reason
    return f"{text}; last pod: {detail}" if detail else text


def lost_pod(pods: Mapping[str, Mapping], attempt: int, cond: Mapping) -> str | None:
    """Why the attempt's pod failed through no fault of its notebook (the node rejected or stopped it, and
    no container exited with an error), or None: the notebook failed, or nothing says otherwise."""
    if cond.get("reason") == "DeadlineExceeded":
        return None
    why = None
    for pod in _by_age(pods):
        meta, status = pod["metadata"], pod.get("status") or {}
        if (meta.get("annotations") or {}).get(A_ATTEMPT) != str(attempt) or status.get("phase") != "Failed":
            continue
        if _exit_detail(pod):
            return None
        if status.get("reason"):
            why = f"pod {meta['name']} failed before its notebook could finish ({status['reason']}"
            why += f": {status['message']})" if status.get("message") else ")"
    return why


@dataclass(frozen=True)
class Verdict:
    """What the caches say about one job now."""

    kind: UpdateKind | None = None  # news for the service: started, succeeded, failed, lost or preempted
    message: str = ""
    note: str = ""  # a line for the job's log
    want: str = ""  # what the workers should now do with the Job ("done", "suspend"); "": as before
    recheck: bool = False  # a worker should look at the Job (it vanished, or must be stopped)


def evaluate(
    t: Tracked, kj: Mapping | None, pods: Mapping[str, Mapping], *, pin_nodes: bool, now: float
) -> Verdict | None:
    """Turn what the caches show about one running job into news, updating its tracker (lock held)."""
    if kj is None:
        if t.seen and not t.recreate:
            # Deleted behind our back (kubectl delete job), or a re-list raced our create: a worker asks the
            # API server which, and reports the job lost if the Job is really gone.
            return Verdict(recheck=True)
        return None
    t.seen = True
    observed = observed_attempt(kj)
    if t.adopted and t.manifests is None and observed > t.attempt:
        if t.started_attempt == t.attempt:
            t.started_attempt = observed  # still the running attempt the store knew
        t.attempt = observed
    if not t.namespace:
        t.namespace = kj["metadata"]["namespace"]
        t.name = kj["metadata"]["name"]
    if kj["metadata"].get("deletionTimestamp"):
        return None
    if cond_true(kj, "Complete") or cond_true(kj, "SuccessCriteriaMet"):
        return Verdict("succeeded", note="the Job completed", want="done")
    failed = cond_true(kj, "Failed") or cond_true(kj, "FailureTarget")
    if failed and not t.recreate:
        if t.manifests is not None and observed < t.attempt:
            return None  # a failure of an earlier attempt: the worker deletes and re-creates the Job
        lost = lost_pod(pods, t.attempt, failed)
        if lost is not None:
            return Verdict("lost", lost, note=lost, want="done")
        if _exited_with(pods, t.attempt, EXIT_NOT_STARTED):
            why = "the kernel did not start (the runner's exit code 4)"
            return Verdict("not_started", why, note=f"the Job failed: {why}; back in line", want="done")
        message = failure_message(kj, pods, failed)
        return Verdict("failed", message, note=f"the Job failed: {message}", want="done")
    if t.kueue and kj["spec"].get("suspend") and t.started_attempt == t.attempt:
        # Kueue took its quota back (preempted or evicted the Workload): the Job stays, and Kueue admits it again.
        return Verdict("preempted", "Kueue suspended the Job", note="Kueue suspended the Job", want="done")
    if kj["spec"].get("suspend") or observed != t.attempt:
        return None
    for pod in pods.values():
        meta = pod["metadata"]
        if (meta.get("annotations") or {}).get(A_ATTEMPT) != str(t.attempt):
            continue
        disrupted = cond_true(pod, "DisruptionTarget")
        if disrupted:
            # Evicted (drain, spot termination, taint manager): not the notebook's fault. Stop the Job here and
            # requeue the job, which resumes from its checkpoint wherever the core places it next.
            why = f"pod {meta['name']} was evicted ({disrupted.get('reason') or 'DisruptionTarget'})"
            if disrupted.get("message"):
                why += f": {disrupted['message']}"
            return Verdict("preempted", why, note=why, want="suspend", recheck=True)
    if t.started_attempt == t.attempt:
        return None
    if len(t.nodes) > 1:
        return _gang_started(t, pods, now)
    for pod in pods.values():
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        if t.node and pin_nodes and (pod.get("spec") or {}).get("nodeName") != t.node:
            continue
        if (meta.get("annotations") or {}).get(A_ATTEMPT, str(t.attempt)) != str(t.attempt):
            continue
        t.started_attempt = t.attempt
        t.last_beat = now
        return Verdict("started", note=f"pod {meta['name']} running on {(pod.get('spec') or {}).get('nodeName')}")
    return None


def _gang_started(t: Tracked, pods: Mapping[str, Mapping], now: float) -> Verdict | None:
    """A gang has started when a pod of the attempt runs on every one of its nodes (all of them at once)."""
    on: dict[str, str] = {}
    for pod in pods.values():
        meta, status = pod["metadata"], pod.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            continue
        if (meta.get("annotations") or {}).get(A_ATTEMPT) != str(t.attempt):
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node in t.nodes:
            on[node] = meta["name"]
    if len(on) < len(t.nodes):
        return None
    t.started_attempt = t.attempt
    t.last_beat = now
    return Verdict(
        "started", note=f"all {len(on)} pods running: " + ", ".join(f"{p} on {n}" for n, p in sorted(on.items()))
    )
