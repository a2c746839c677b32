"""A job store filled with many finished jobs, as the list benchmarks need (no server involved)."""

from __future__ import annotations

import time
from pathlib import Path

from ..core import Job, JobSpec, JobState, Priority
from ..store import Store, default_url


def prefill_finished_jobs(data_dir: Path, n: int, notebook: str = "done.ipynb", owner: str = "bench") -> None:
    """Write `n` SUCCEEDED jobs (a day old, a minute each; 1 to 4 GPUs, all three priorities) into the
    store a server on `data_dir` will open."""
    store = Store(default_url(data_dir))
    now = time.time() - 86400
    jobs = []
    for i in range(n):
        spec = JobSpec(notebook, gpus=1 + i % 4, priority=Priority(i % 3), tenant="default", owner=owner)
        job = Job(id=f"old{i:06d}", spec=spec, submitted_at=now + i, seq=i, state=JobState.SUCCEEDED)
        job.first_started_at = job.started_at = now + i + 1
        job.finished_at = now + i + 60
        jobs.append(job)
    for start in range(0, n, 2000):
        store.record(jobs[start : start + 2000])
    store.close()


# The Jobs view's browser tests: fixed times (2026-01-05 09:00 UTC onwards), so its screenshots are
# the same on every run; ids sort like their submission order.
TABLE_EPOCH = 1767603600.0
TABLE_NOTEBOOKS = ("alpha.ipynb", "beta.ipynb", "gamma.ipynb", "delta.ipynb", "train/epsilon.ipynb")
TABLE_TENANTS = ("default", "team-a", "team-b")
TABLE_OWNERS = ("alice", "bob")


def prefill_table_jobs(data_dir: Path, n: int) -> dict[str, int]:
    """Write `n` ended jobs with varied notebooks, tenants, owners, GPUs, priorities and end states into
    the store a server on `data_dir` will open; returns how many ended in each state."""
    store = Store(default_url(data_dir))
    ends = (JobState.SUCCEEDED, JobState.SUCCEEDED, JobState.FAILED, JobState.SUCCEEDED, JobState.CANCELLED)
    counts: dict[str, int] = {}
    jobs = []
    for i in range(n):
        spec = JobSpec(
            TABLE_NOTEBOOKS[i % len(TABLE_NOTEBOOKS)],
            gpus=1 + i % 4,
            priority=Priority(i % 3),
            tenant=TABLE_TENANTS[i % len(TABLE_TENANTS)],
            owner=TABLE_OWNERS[i % len(TABLE_OWNERS)],
            parameters={"seed": i},
        )
        submitted = TABLE_EPOCH + 60 * i
        job = Job(id=f"tbl{i:06d}", spec=spec, submitted_at=submitted, seq=i, state=ends[i % len(ends)])
        job.first_started_at = job.started_at = submitted + 5 + i % 50
        job.finished_at = job.started_at + 30 + 7 * (i % 40)
        counts[job.state.value] = counts.get(job.state.value, 0) + 1
        jobs.append(job)
    for start in range(0, n, 2000):
        store.record(jobs[start : start + 2000])
    store.close()
    return counts
