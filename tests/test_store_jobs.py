"""Jobs read back from the store after a restart keep what orders them: a run `dynamic` paused for a job
that had not run keeps its place counted from the pause (docs/scheduling.md rule 8), on SQLite and a real
PostgreSQL server (skipped, saying why, where its binaries are not installed)."""

from __future__ import annotations

import sqlite3

import pytest

from jupyter_gpusched.core import Admit, Cluster, JobSpec, JobState, NodeSpec, Scheduler, SchedulerConfig, Tenant
from jupyter_gpusched.core.model import Job
from jupyter_gpusched.store import Store, default_url

pytestmark = pytest.mark.timeout(180)


def _scheduler() -> Scheduler:
    return Scheduler(Cluster([NodeSpec("n0", 1)]), [Tenant("a", 1)], "dynamic", SchedulerConfig(aging_interval=3600.0))


def _pass(s: Scheduler, now: float) -> list[str]:
    admitted = [d.job_id for d in s.schedule(now) if isinstance(d, Admit)]
    for job_id in admitted:
        s.started(job_id, now)
    return admitted


def test_a_paused_run_keeps_its_place_in_line_across_a_restart(store_url):
    s = _scheduler()
    long = s.submit(JobSpec("long.ipynb", tenant="a", preemptible=True, checkpoint_interval=1800.0), 0.0)
    assert _pass(s, 0.0) == [long.id]
    new = s.submit(JobSpec("new.ipynb", tenant="a"), 100.0)
    queued = s.submit(JobSpec("queued.ipynb", tenant="a"), 200.0)
    s.checkpointed(long.id, 3600.0)
    assert _pass(s, 3700.0) == [new.id] and long.state is JobState.QUEUED
    store = Store(store_url)
    store.record(s.jobs.values())
    store.close()

    again, store = _scheduler(), Store(store_url)
    for job, _info in store.load_jobs():
        again.restore(job)
    store.close()
    assert again.jobs[long.id].line_shift_s == pytest.approx(3700.0)
    again.finished(new.id, 3800.0, ok=True)
    assert _pass(again, 3800.0) == [queued.id]  # not the paused run, whose place counts from its pause


def test_a_store_from_before_line_shift_s_opens_with_every_place_unshifted(tmp_path):
    url = default_url(tmp_path)
    store = Store(url)
    store.record([Job(id="old", spec=JobSpec("nb.ipynb"), submitted_at=1.0, seq=0)])
    store.close()
    with sqlite3.connect(tmp_path / url.rsplit("/", 1)[1]) as db:  # as an earlier version left it
        db.execute("ALTER TABLE jobs DROP COLUMN line_shift_s")
    store = Store(url)
    [(job, _)] = store.load_jobs()
    assert job.id == "old" and job.line_shift_s == 0.0
    store.record([Job(id="paused", spec=JobSpec("nb.ipynb"), submitted_at=2.0, seq=1, line_shift_s=60.0)])
    assert {j.id: j.line_shift_s for j, _ in store.load_jobs()} == {"old": 0.0, "paused": 60.0}
    store.close()
