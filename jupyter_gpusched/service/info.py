"""What the service knows of a job beyond the core's record: its folder and its runner's news."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..core import JobSpec


@dataclass
class JobInfo:
    job_dir: str | None = None  # the job's folder (log, executed notebook); None: not made yet
    heartbeat_at: float | None = None  # when the runner last gave a sign of life
    progress: list[int] | None = None  # [code cells done, code cells in total], when known
    message: str = ""  # the last word on the job: its error, or why it could not start
    launch_failures: int = 0  # failed launches in a row (infrastructure), counted apart from max_retries
    # The stall watch (stalls.py): the job's own timeout, its last progress, what it does, its GPU-seconds.
    stall_timeout: float | None = None  # seconds; None: c.GPUSched.stall_timeout
    progress_at: float | None = None  # when a report last showed progress
    reported_at: float | None = None  # when the last report came (stalled needs one past the timeout)
    progress_why: str = ""  # what moved then ("cells ran", "GPU busy" ...)
    stalled_since: float | None = None  # when it was marked stalled; None: it is not
    activity: dict[str, Any] | None = None  # the last report's figures (cell, CPU, I/O, GPU use)
    waiting_on_data: dict[str, float] | None = None  # GPU nearly idle while CPU or I/O busy: the figures
    gpu_s: float = 0.0  # GPU-seconds reported on (allocated)
    idle_gpu_s: float = 0.0  # of which its GPUs were idle
    data_wait_gpu_s: float = 0.0  # of which it waited on data
    # Notifications (notify_jobs.py): the job's targets (Target.to_dict), the deliveries done or given up on.
    notify: list[dict[str, Any]] | None = None
    notified: list[str] = field(default_factory=list)
    # A GPU kernel's request (docs/interactive.md), as its provisioner saw the kernel:
    busy_s: float = 0.0  # seconds its kernel was executing (execution_state busy)
    reclaimed_idle_s: float | None = None  # reclaimed for idleness: how long it had been idle; None: not reclaimed

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> JobInfo:
        """From the store's JSON (keys it does not know, from other versions, are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Submission:
    """A checked job about to be submitted, with what its JobInfo starts with."""

    spec: JobSpec
    stall_timeout: float | None = None
    notify: tuple[dict[str, Any], ...] = ()  # its notification targets (Target.to_dict)
