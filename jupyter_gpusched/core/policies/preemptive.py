"""Shared walk for preemptive research baselines (Tiresias 2D-LAS, the SRPT oracle).

They ignore tenants, quotas and priority classes: one global order, set by the policy's
`queue_key`. The walk admits every queued job that fits, in that order (no head-of-line
blocking), and when one does not fit it may preempt running jobs the policy ranks below
it, on the one node where that frees room at the least cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..model import Job, work_at_risk
from .base import Policy

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler


class PreemptiveListPolicy(Policy):
    """Subclasses give `queue_key`, `queued_rank(job)` (queue order must follow it,
    ascending) and `bar(s, job, now)` for a running job: a queued job whose rank is below a
    running job's bar may preempt it. A higher bar means easier to preempt.

    As published, these baselines preempt any job. With `only_preemptible` they preempt only
    jobs marked preemptible, as every policy of ours must: the fair yardstick where a trace
    marks most work non-preemptible (benchmarks/RESULTS.md)."""

    def __init__(self, only_preemptible: bool = False) -> None:
        self.only_preemptible = bool(only_preemptible)

    def queued_rank(self, job: Job) -> Any:
        raise NotImplementedError

    def bar(self, s: Scheduler, job: Job, now: float) -> Any:
        raise NotImplementedError

    def schedule(self, s: Scheduler, now: float) -> None:
        if not s.queue:
            return
        running: dict[str, Any] | None = None  # running job id -> bar, computed when first needed
        worst: Any = None
        failed: dict[tuple, int] = {}  # (preemptible, gpu type) -> smallest job that found no room
        # ... and the smallest that found no victims: a later job ranks no better, so one as
        # large finds none either (until a preemption changes who runs)
        no_victims: dict[tuple, int] = {}
        # A visit that neither admits nor preempts leaves the next jobs of its group (queue_group:
        # same rank, size, preemptible and gpu type) to do just as little until something is
        # admitted or preempted: the walk sets the group aside until then (walk.changed).
        walk = s.queue.walk()
        for job in walk:
            key = (job.spec.preemptible, job.spec.gpu_type)
            alloc = s.place(job) if job.gpus < failed.get(key, 1 << 30) else None
            if alloc is None:
                failed[key] = min(job.gpus, failed.get(key, 1 << 30))
                if running is None:
                    running = {
                        j.id: self.bar(s, j, now)
                        for j in s.active.values()
                        if not j.spec.interactive and (j.spec.preemptible or not self.only_preemptible)
                    }
                    worst = max(running.values(), default=None)
                rank = self.queued_rank(job)
                if worst is None or not rank < worst:
                    # the queue is in rank order: nobody behind it may preempt either
                    if s.cluster.free_gpus == 0:
                        break
                    walk.set_aside()
                    continue
                if job.gpus >= no_victims.get(key, 1 << 30):
                    walk.set_aside()
                    continue
                victims = self._victims(s, job, rank, running, now)
                if not victims:
                    no_victims[key] = job.gpus
                    walk.set_aside()
                    continue
                for v in victims:
                    s.preempt(v.id, now, f"preempted for {job.id} ({self.name})")
                    running.pop(v.id, None)
                worst = max(running.values(), default=None)
                failed.clear()
                no_victims.clear()
                walk.changed()
                alloc = s.place(job)
                if alloc is None:  # pragma: no cover - the victims' node has room by construction
                    continue
            s.admit(job, alloc, borrowed=False, now=now)
            walk.changed()
            if running is not None:
                running[job.id] = b = self.bar(s, job, now)
                worst = b if worst is None else max(worst, b)

    def _victims(self, s: Scheduler, job: Job, rank: Any, running: dict[str, Any], now: float) -> list[Job]:
        """Running jobs whose bar is above its rank, on the single node where preempting them frees room for
        `job` with the fewest GPUs preempted (then least work at risk)."""
        g = job.gpus
        pools = {p for group in s.pool_choices(job.spec) for p in group}
        by_node: dict[str, list[Job]] = {}
        for jid, r in running.items():
            if not rank < r:
                continue
            v = s.jobs[jid]
            if len(v.allocation) != 1:
                continue  # a multi-node job frees room on several nodes; leave it
            node = v.allocation[0][0]
            if s.cluster.pool_of(node) in pools and s.cluster.capacity(node) >= g:
                by_node.setdefault(node, []).append(v)
        best = None
        for node, cands in by_node.items():
            free = s.cluster.free_on(node)
            cands.sort(key=lambda v: (running[v.id], v.seq), reverse=True)  # easiest to preempt first
            chosen, risk = [], 0.0
            for v in cands:
                if free >= g:
                    break
                chosen.append(v)
                free += v.gpus
                risk += work_at_risk(v, now)
            if free >= g:
                cost = (sum(v.gpus for v in chosen), risk, node)
                if best is None or cost < best[0]:
                    best = (cost, chosen)
        return best[1] if best is not None else []
