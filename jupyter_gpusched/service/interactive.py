"""Interactive requests (GPU kernels) in the live service: what the kernel provisioner
(`server/provisioner.py`) asks, and what a restart does to requests it left behind.

A kernel's request is a job with `spec.interactive`: it waits in the same queue, under the same
quotas and aging. Once admitted, nothing is launched (`Service._launch` marks it RUNNING at once:
the GPUs are *reserved*); the provisioner starts the kernel with CUDA_VISIBLE_DEVICES set to the
allocation and cancels the request when the kernel shuts down, which frees the GPUs at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core import Job, JobState, Scheduler
from ..core.idle import IdleAction, IdleClock, idle_action
from .info import JobInfo

if TYPE_CHECKING:
    from .loop import Service

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


def waiting(scheduler: Scheduler, job: Job, start: float | None, now: float) -> Waiting:
    """Where a kernel's request stands; `start` is its estimated start (`Service.estimated_start`)."""
    queued = job.state is JobState.QUEUED
    position = scheduler.position(job.id) if queued else None
    eta = max(0.0, start - now) if queued and start is not None else None
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


@dataclass
class KernelIdleWatch:
    """One GPU kernel's idle reclaim and busy seconds (docs/interactive.md), whoever samples the kernel: its
    provisioner beside this service (`server/provisioner.py`), or, in hub mode, the user's server reporting to
    the hub service (`POST interactive/{kernel_id}/activity`; `remote`). The rules are core/idle.py's; the
    warning is the request's `message`, which the lab shows with a Keep action. `Service.kernel_watches`
    holds the watches by request id (the Keep endpoint finds them there)."""

    service: Service
    job_id: str
    clock: IdleClock
    remote: bool = False
    reason: str = ""  # why it was reclaimed, once it was

    @property
    def _info(self) -> JobInfo:
        return self.service.info.setdefault(self.job_id, JobInfo())

    def observe(self, now: float, busy: bool, last_activity: float | None, busy_s: float = 0.0) -> IdleAction:
        """One look at the kernel: busy now or not, when it last ran something, `busy_s` more busy seconds
        (the "executing" metric). Warns (the request's message) or answers RECLAIM: the driver shuts it down."""
        self._info.busy_s += max(0.0, busy_s)
        policy = self.service.config.interactive_idle
        if not policy.enabled:
            return IdleAction.NONE
        clock = self.clock
        if last_activity is not None:
            clock.activity(last_activity)
        action = idle_action(clock, now, busy, len(self.service.scheduler.queue) > 0, policy)
        if action is IdleAction.WARN:
            clock.warned_at = now
            minutes = max(1, round(policy.warn_for / 60))
            self._info.message = (
                f"this kernel's GPU will be given back in {minutes} minute{'s' if minutes != 1 else ''} "
                "unless you run something"
            )
        elif action is IdleAction.NONE and clock.warned_at is None:
            self._info.message = ""
        if action is IdleAction.RECLAIM:
            self._info.reclaimed_idle_s = now - clock.idle_since
            self.reason = f"idle {(now - clock.idle_since) / 60:.0f} min while others waited: GPUs reclaimed"
        else:  # not (or no longer: it was found running code when reclaimed) reclaimed
            self._info.reclaimed_idle_s, self.reason = None, ""
        return action

    def keep(self, now: float) -> float:
        """The user's "keep" on the warning: restart the idle clock (within max_keep); seconds added."""
        added = self.clock.keep(now, self.service.config.interactive_idle)
        self._info.message = ""
        return added

    def sample_every(self) -> float:
        """How often to look at the kernel: a quarter of the timeout and of the warning, a second at most."""
        policy = self.service.config.interactive_idle
        return max(0.1, min(1.0, policy.timeout / 4, policy.warn_for / 4)) if policy.enabled else 1.0

    def report_every(self) -> float:
        """How often a user's server reports on its kernel (hub mode): as fine as the rules need, within 10 s."""
        policy = self.service.config.interactive_idle
        return max(0.5, min(10.0, policy.timeout / 4, policy.warn_for / 4)) if policy.enabled else 10.0
