"""The policy interface and the plain in-order walk the baselines share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from ..queues import QueueKey, fifo_key
from ..quotas import Admission

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler, SchedulerConfig


class Policy(ABC):
    name: ClassVar[str] = ""
    allow_borrowing: ClassVar[bool] = True  # may a tenant run past its quota?

    def queue_key(self, config: SchedulerConfig) -> QueueKey:
        return fifo_key

    @abstractmethod
    def schedule(self, s: Scheduler, now: float) -> None:
        """Walk `s.queue` and call `s.admit` / `s.preempt`."""


def admit_in_order(s: Scheduler, now: float, *, per_tenant: bool, respect_quota: bool) -> None:
    """Strict head-of-line order: the first job that cannot start blocks everything behind
    it (in its tenant's line when `per_tenant`, else the whole queue). No backfill."""
    blocked: set[str] = set()
    for job in s.queue:
        if s.cluster.free_gpus == 0:
            return
        if job.tenant in blocked:
            continue
        if respect_quota and s.ledger.classify(job.tenant, job.gpus) is Admission.OVER_LIMIT:
            alloc = None
        else:
            alloc = s.place(job)
        if alloc is None:
            if not per_tenant:
                return
            blocked.add(job.tenant)
            continue
        s.admit(job, alloc, borrowed=False, now=now)
