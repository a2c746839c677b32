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
