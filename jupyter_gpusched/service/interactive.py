"""Interactive requests (GPU kernels) in the live service: what the kernel provisioner
(`server/provisioner.py`) asks, and what a restart does to requests it left behind.

A kernel's request is a job with `spec.interactive`: it waits in the same queue, under the same
quotas and aging. Once admitted, nothing is launched (`Service._launch` marks it RUNNING at once:
the GPUs are *reserved*); the provisioner starts the kernel with CUDA_VISIBLE_DEVICES set to the
allocation and cancels the request when the kernel shuts down, which frees the GPUs at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import Job, JobState, Scheduler

RESTART_REASON = "the server restarted: its kernel went with it, so its GPUs are released"


@dataclass(frozen=True)
class Waiting:
    """Where a kernel's request stands while it waits for GPUs."""

    state: JobState
    position: int | None  # 1 = next in line
    eta_seconds: float | None  # None: unknown (some job ahead has no runtime estimate)
    gpu_ids: tuple[int, ...]  # its GPUs once it holds them
    reason: str

    @property
    def message(self) -> str:
        """The line a user sees while the kernel starts: "waiting for a GPU: #2 in line, about 6 min"."""
        if self.state is JobState.RUNNING:
            return f"GPUs {','.join(map(str, self.gpu_ids))} reserved"
        if self.state.terminal:
            return f"not started: {self.reason}"
        where = f"#{self.position} in line" if self.position else "in line"
        if self.eta_seconds is not None:
            minutes = round(self.eta_seconds / 60)
            where += f", about {minutes} min" if minutes >= 1 else ", under a minute"
        return f"waiting for a GPU: {where}"


def waiting(scheduler: Scheduler, job: Job, now: float) -> Waiting:
    position = scheduler.position(job.id) if job.state is JobState.QUEUED else None
    eta = None
    if job.state is JobState.QUEUED:
        start = scheduler.estimate_start(job.id, now)
        eta = None if start is None or math.isinf(start) else max(0.0, start - now)
    gpu_ids = tuple(g for _, ids in job.allocation for g in ids)
    return Waiting(job.state, None if position is None else position + 1, eta, gpu_ids, job.reason)


def release_after_restart(scheduler: Scheduler, job: Job, now: float) -> Job:
    """A kernel's request read back after a restart is cancelled, never adopted: jupyter_server does not
    re-adopt the kernels of a previous run, so no provisioner is left to use the GPUs or give them back."""
    job.allocation, job.borrowed = (), False  # held nothing in this run: nothing to free but its quota charge
    scheduler.restore(job)
    return scheduler.cancel(job.id, now, actor="gpusched", reason=RESTART_REASON)
