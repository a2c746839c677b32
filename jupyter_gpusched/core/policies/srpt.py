"""`srpt`: shortest remaining processing time, an oracle reference for benchmarks.

It reads every job's true runtime from `JobSpec.est_runtime`, which only a simulator may
fill with the trace's durations (see sim/engine.py): it is a yardstick, not a policy to
deploy. Remaining time is the runtime minus the service received (GPU-seconds / GPUs), so
work a preemption threw away counts as done: a small optimism in its favour. It places
every job that fits in that order and preempts a running job when the waiting one would
finish sooner even after paying for the work the preemption throws away. Tenants, quotas
and priority classes are ignored.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..model import Job, attained_now, work_at_risk
from .preemptive import PreemptiveListPolicy
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler


def _remaining(job: Job, service: float) -> float:
    est = job.spec.est_runtime
    if est is None:
        return math.inf
    return max(0.0, est - service / job.gpus)


@register("srpt")
class SrptOraclePolicy(PreemptiveListPolicy):
    oracle = True  # the simulator tells it true runtimes

    def queue_key(self, config):
        def key(job: Job) -> tuple:
            return (_remaining(job, job.attained_gpu_s), job.gpus, job.submitted_at, job.seq)

        return key

    def queued_rank(self, job: Job) -> float:
        return _remaining(job, job.attained_gpu_s)

    def bar(self, s: Scheduler, job: Job, now: float) -> float:
        # a waiting job preempts when it would end sooner even after the running one pays
        # for the work the preemption throws away (per GPU)
        return _remaining(job, attained_now(job, now)) - work_at_risk(job, now) / job.gpus
