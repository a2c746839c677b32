"""`tiresias`: discretized two-dimensional least-attained-service (Gu et al., NSDI '19).

A research baseline that needs no runtime estimates. A job's service is the GPU-time it
has received (GPUs x seconds, over all attempts: the "two dimensions"). Queues are set by
service thresholds (default: one queue below 1 GPU-hour, one above); a lower queue always
goes first, FIFO (by submit time) within a queue. A running job that crosses a threshold
is demoted, and a waiting job of a higher queue preempts it. Tenants, quotas and priority
classes are ignored; Tiresias' optional starvation promotion is not modelled, so long
jobs can wait behind a stream of short ones.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING

from ..model import Job, attained_now
from .preemptive import PreemptiveListPolicy
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler

DEFAULT_THRESHOLDS = (3600.0,)  # GPU-seconds: queue 0 below one GPU-hour, queue 1 above


@register("tiresias")
class TiresiasPolicy(PreemptiveListPolicy):
    def __init__(self, thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS, only_preemptible: bool = False) -> None:
        if list(thresholds) != sorted(thresholds) or any(t <= 0 for t in thresholds):
            raise ValueError("tiresias thresholds must be positive and increasing")
        super().__init__(only_preemptible)
        self.thresholds = tuple(float(t) for t in thresholds)

    def level(self, service: float) -> int:
        return bisect.bisect_right(self.thresholds, service)

    def queue_key(self, config):
        # Fixed while a job waits: its service only grows while it runs.
        level = self.level

        def key(job: Job) -> tuple:
            return (level(job.attained_gpu_s), job.submitted_at, job.seq)

        return key

    def queue_group(self):
        # everything the walk (PreemptiveListPolicy.schedule) reads of a queued job
        level = self.level

        def group(job: Job) -> tuple:
            spec = job.spec
            return (level(job.attained_gpu_s), spec.gpus, spec.preemptible, spec.gpu_type)

        return group

    def queued_rank(self, job: Job) -> int:
        return self.level(job.attained_gpu_s)

    def bar(self, s: Scheduler, job: Job, now: float) -> int:
        # only a job of a strictly higher queue preempts: none within a queue
        return self.level(attained_now(job, now))

    def next_wakeup(self, s: Scheduler, now: float) -> float | None:
        """When the next running job crosses a threshold (a demotion the driver should
        wake the scheduler for), if anyone is waiting to take its place."""
        if not s.queue:
            return None
        best = math.inf
        for job in s.active.values():
            if job.started_at is None:
                continue
            service = attained_now(job, now)
            lvl = self.level(service)
            if lvl < len(self.thresholds):
                best = min(best, now + (self.thresholds[lvl] - service) / job.gpus + 1e-6)
        return best if math.isfinite(best) else None
