"""Taking over a store: one scheduler per store, and the truth about jobs a previous owner left active.

Ownership: a service claims its store (and data dir) before it reads a job (`Store.claim`,
store/ownership.py). A second service on the same store gets no claim: it waits as a standby,
touches no job, and answers every request with `SchedulerStandby` (HTTP 503) naming the owner,
until the owner stops and it takes over.

Settling: a job the store says was active (ADMITTED or RUNNING) when the previous owner stopped,
and that the backend did not adopt, is put back in the state its run really reached:

1. whatever the previous server left running for it is killed (`Backend.reap_orphan`); a runner
   whose cells had all run records its outcome as it stops (runner.py);
2. its runner's exit record (backends/exitrecord.py) -> the run finished while the server was
   down: SUCCEEDED or FAILED with the notebook's own message, never run again; or its kernel never
   came up ("not_started"): back in line, no retry used;
3. no launch of this admission in its folder -> it never started: back in line, no retry used;
4. otherwise its run was interrupted: lost, and requeued or failed by `max_retries`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..backends.base import Backend
from ..backends.exitrecord import launched_since, read_exit_record
from ..core import Job, JobState, Scheduler
from ..store import Store
from .errors import UpstreamError
from .info import JobInfo

log = logging.getLogger("jupyter_gpusched")

FINISHED, NOT_STARTED, LOST = "finished while the server was down", "had not started", "lost"


class SchedulerStandby(UpstreamError):
    """Another scheduler owns the store: this one waits (HTTP 503, like an upstream that cannot be reached)."""

    def __init__(self, message: str):
        super().__init__(message, "standby", unreachable=True)


def standby_message(store: Store) -> str:
    owner, where = store.owner()
    return (
        f"another jupyter-gpusched scheduler ({owner}) owns {where}; this server's scheduler waits as a standby "
        "and takes over when that one stops"
    )


def settle(scheduler: Scheduler, backend: Backend, job: Job, info: JobInfo, job_dir: Path, now: float) -> str:
    """Put `job` (active in the store, not adopted by the backend) into `scheduler` in the state its run reached.
    Returns which case it was: FINISHED, NOT_STARTED or LOST."""
    if backend.reap_orphan(job_dir):
        log.warning("killed the runner of job %s left from before the restart", job.id)
    record = read_exit_record(job_dir)
    if record is not None and record.status == "not_started" and job.state is JobState.ADMITTED:
        _restore_without_gpus(scheduler, job)
        scheduler.not_started(job.id, now, f"could not start: {record.message}")
        info.message = f"could not start: {record.message}"
        return NOT_STARTED
    if record is not None:
        _restore_without_gpus(scheduler, job)
        started = max(record.started or record.time, job.admitted_at or 0.0)
        if job.state is JobState.ADMITTED:
            scheduler.started(job.id, min(started, record.time))
        reason = record.message if not record.ok else "completed while the server was down"
        scheduler.finished(job.id, max(record.time, job.started_at or 0.0), ok=record.ok, reason=reason)
        info.message, info.heartbeat_at = record.message, record.time
        if record.progress is not None:
            info.progress = list(record.progress)
        return FINISHED
    if job.state is JobState.ADMITTED and not launched_since(job_dir, job.admitted_at):
        _restore_without_gpus(scheduler, job)
        scheduler.not_started(job.id, now, "the server stopped before the job started")
        return NOT_STARTED
    scheduler.recover(job, now, "the server stopped while the job was active")
    return LOST


def _restore_without_gpus(scheduler: Scheduler, job: Job) -> None:
    """Back into the scheduler as active, holding no GPUs (its allocation belonged to the previous server)."""
    job.allocation, job.borrowed = (), False
    scheduler.restore(job)
