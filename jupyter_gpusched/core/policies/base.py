"""The policy interface and the plain in-order walk the baselines share.

Every hook a driver (the live service, the simulator) may call is declared here with a
default, so drivers call them unconditionally and a policy overrides only what it needs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from ..queues import QueueGroup, QueueKey, fifo_key
from ..quotas import Admission

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Job
    from ..scheduler import Scheduler, SchedulerConfig


class Policy(ABC):
    name: str = ""
    """The name it is registered under (`register` sets it on the class)."""

    allow_borrowing: bool = True
    """May a tenant run past its quota on idle GPUs? The scheduler's quota ledger asks once."""

    oracle: bool = False
    """A yardstick that is told every job's true runtime: the simulator fills
    `JobSpec.est_runtime` with the trace's durations for it. Never deployed."""

    def queue_key(self, config: SchedulerConfig) -> QueueKey:
        """The order of the queue (smallest key first); FIFO unless overridden."""
        return fifo_key

    def queue_group(self) -> QueueGroup | None:
        """Groups of queued jobs the policy's pass treats alike (JobQueue.walk), or None."""
        return None

    @abstractmethod
    def schedule(self, s: Scheduler, now: float) -> None:
        """Walk `s.queue` and call `s.admit` / `s.preempt`."""

    def checkpoint_interval(self, s: Scheduler, job: Job, now: float) -> float | None:
        """The checkpoint interval for the attempt of `job` starting now, on the GPUs it was
        just given. The driver asks when a job that checkpoints starts (its
        `spec.checkpoint_interval` is set) and hands the answer to its runner. Default: the
        interval the job asked for."""
        return job.spec.checkpoint_interval

    def handed_interval(self, s: Scheduler, job: Job, now: float) -> float | None:
        """The interval a job's attempt is handed ($GPUSCHED_CHECKPOINT_INTERVAL): the one it was submitted
        with, or the policy's when that is shorter (a spot pool's); None for a job that asked for none. The
        submitted one is a ceiling: a policy never makes a job save less often than its owner asked."""
        asked = job.spec.checkpoint_interval
        if asked is None:
            return None
        wanted = self.checkpoint_interval(s, job, now)
        return asked if wanted is None else min(asked, wanted)

    def max_pool_gpus(self, s: Scheduler, pool: str) -> float:
        """The most GPUs `pool` may hold while this policy runs; what submit checks a job's
        size against. Default: its GPUs now (a policy that grows pools says more)."""
        return s.cluster.pool_gpus(pool)

    def node_leaving(self, s: Scheduler, node: str, now: float, interrupted: bool) -> None:
        """`node` is about to leave the cluster (its jobs already preempted). `interrupted`:
        it was taken away (a spot reclaim, a failure); False: the driver retired it on a
        scale-in the policy asked for. Default: nothing."""
        return None

    def next_wakeup(self, s: Scheduler, now: float) -> float | None:
        """When the policy wants another pass although nothing else changes (a demotion, a
        grace period running out), or None. The driver schedules a pass at that time."""
        return None


def admit_in_order(s: Scheduler, now: float, *, per_tenant: bool, respect_quota: bool) -> None:
    """Strict head-of-line order: the first job that cannot start blocks everything behind
    it (in its tenant's line when `per_tenant`, else the whole queue). No backfill.

    A grouped queue (`tenant_group`) lets the walk set a blocked tenant's line aside for the
    pass: its later jobs are never visited (they would only be skipped)."""
    blocked: set[str] = set()
    walk = s.queue.walk()
    for job in walk:
        if s.cluster.free_gpus == 0:
            return
        if job.tenant in blocked:
            if len(blocked) == s.queue.tenants():
                return  # every tenant with queued jobs is blocked: nothing behind can start
            continue
        if respect_quota and s.ledger.classify(job.tenant, job.gpus, job.spec.interactive) is Admission.OVER_LIMIT:
            alloc = None
        else:
            alloc = s.place(job)
        if alloc is None:
            if not per_tenant:
                return
            blocked.add(job.tenant)
            walk.set_aside_tenant(job.tenant)  # a blocked tenant stays blocked for the pass
            continue
        s.admit(job, alloc, borrowed=False, now=now)


def tenant_group(job: Job) -> str:
    """Groups for a walk that blocks whole tenants (`admit_in_order` with `per_tenant`)."""
    return job.spec.tenant
