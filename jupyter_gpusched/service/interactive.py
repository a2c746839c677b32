"""Interactive requests (GPU kernels) in the live service: what the kernel provisioner
(`server/provisioner.py`) asks, and what a restart does to requests it left behind.

A kernel's request is a job with `spec.interactive`: it waits in the same queue, under the same
quotas and aging. Once admitted, nothing is launched (`Service._launch` marks it RUNNING at once:
the GPUs are *reserved*); the provisioner starts the kernel with CUDA_VISIBLE_DEVICES set to the
allocation and cancels the request when the kernel shuts down, which frees the GPUs at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..core import Job, JobState, Scheduler
from .info import JobInfo

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


HOUR = 3600.0


def kernel_usage(jobs: Iterable[Job], info: Mapping[str, JobInfo], now: float) -> dict[str, dict[str, float]]:
    """GPU kernels' GPU-hours per user: `held` (reserved), `executing` (of those, the kernel busy: its
    provisioner samples execution_state), `reclaimed_idle` (the idle stretch of kernels whose GPUs idle
    reclaim gave back, times their GPUs), `reclaims` and `kernels` (requests that held GPUs)."""
    users: dict[str, dict[str, float]] = {}
    for job in jobs:
        if not job.spec.interactive or job.first_started_at is None:
            continue  # a kernel that never held GPUs costs nothing
        held_s = job.attained_gpu_s
        if job.state is JobState.RUNNING and job.started_at is not None:
            held_s += max(0.0, now - job.started_at) * job.gpus
        known = info.get(job.id) or JobInfo()
        row = users.setdefault(
            job.spec.owner,
            {"held": 0.0, "executing": 0.0, "reclaimed_idle": 0.0, "reclaims": 0, "kernels": 0},
        )
        row["kernels"] += 1
        row["held"] += held_s / HOUR
        row["executing"] += min(held_s, known.busy_s * job.gpus) / HOUR
        if known.reclaimed_idle_s is not None:
            row["reclaims"] += 1
            row["reclaimed_idle"] += known.reclaimed_idle_s * job.gpus / HOUR
    return users
