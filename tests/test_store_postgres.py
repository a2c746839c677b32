"""The store against a real PostgreSQL server (Debian's `postgresql` package; each test gets
its own database). Skips, saying why, only where the server binaries are not installed."""

from __future__ import annotations

import dataclasses

import pytest

from jupyter_gpusched.core.model import Event, Job, JobSpec, JobState, Priority
from jupyter_gpusched.service import Service, ServiceConfig
from jupyter_gpusched.store import Store
from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def store(pg):
    s = Store(pg.create_database())
    yield s
    s.close()


def fields(job: Job) -> dict:
    return {f.name: getattr(job, f.name) for f in dataclasses.fields(job)}


def make_job(job_id: str, seq: int, **spec) -> Job:
    fields = dict(notebook="dir/nb.ipynb", gpus=2, priority=Priority.HIGH, tenant="vision", owner="alice")
    fields.update(spec)
    return Job(id=job_id, spec=JobSpec(**fields), submitted_at=1_700_000_000.123456 + seq, seq=seq)


def test_jobs_round_trip_with_every_field(store):
    job = make_job(
        "j1",
        1,
        parameters={"lr": 0.1, "layers": [1, 2, {"x": None}], "name": "naïve ✓"},
        max_runtime=3600.5,
        preemptible=True,
        max_retries=5,
        gpu_type="a100",
        checkpoint_interval=120.0,
        owner="u" * 200,  # Hub user names may be long
    )
    job.state = JobState.RUNNING
    job.allocation = (("node-a", (0, 1)),)
    job.borrowed = True
    job.admitted_at, job.started_at, job.first_started_at = 1.5, 2.25, 2.25
    job.attempts, job.lost_count, job.preemptions = 2, 1, 1
    job.attained_gpu_s, job.last_checkpoint_at, job.reason = 12.75, 3.5, "running"
    info = {"job_dir": "/data/jobs/j1", "progress": [3, 7], "message": "ok"}
    store.record([job], [], {"j1": info})
    [(loaded, loaded_info)] = store.load_jobs()
    assert fields(loaded) == fields(job)
    assert loaded_info == info
    assert loaded.submitted_at == job.submitted_at  # double precision, not float4


def test_upsert_updates_in_place(store):
    job = make_job("j1", 1)
    store.record([job], [Event("j1", 1.0, None, JobState.QUEUED, "submitted", "alice")], {"j1": {"job_dir": "/d/j1"}})
    job.state, job.reason = JobState.CANCELLED, "cancelled by alice"
    job.finished_at = 5.0
    store.record(
        [job], [Event("j1", 5.0, JobState.QUEUED, JobState.CANCELLED, "cancelled by alice", "alice")], {"j1": {}}
    )
    assert store.count_jobs() == 1
    [(loaded, info)] = store.load_jobs()
    assert loaded.state is JobState.CANCELLED and loaded.finished_at == 5.0 and info == {}
    # the same job twice in one batch, and jobs with and without driver info together
    other = make_job("j2", 2)
    job.reason = "last write wins"
    store.record([job, other, job], [], {"j1": {"n": 2}})
    loaded = {j.id: (j, i) for j, i in store.load_jobs()}
    assert set(loaded) == {"j1", "j2"} and loaded["j1"][0].reason == "last write wins" and loaded["j1"][1] == {"n": 2}
    assert [j.id for j, _ in store.load_jobs()] == ["j1", "j2"]  # submission order


def test_events_keep_their_order(store):
    store.record([make_job("j1", 1)])
    path = [JobState.QUEUED, JobState.ADMITTED, JobState.RUNNING, JobState.PREEMPTED, JobState.QUEUED]
    events = [
        Event("j1", float(i), path[i - 1] if i else None, s, f"step {i}", "scheduler") for i, s in enumerate(path)
    ]
    for e in events:  # one transaction each, as the service writes them
        store.record([], [e])
    assert store.events("j1") == events
    assert store.events("nope") == []


def test_usage_history_upserts_per_minute_and_tenant(store):
    store.record_usage(100, {"vision": (4, 2), "nlp": (1, 1)})
    store.record_usage(100, {"vision": (5, 3)})  # the same minute again: replaced, not added
    store.record_usage(101, {"vision": (0, 0)})
    assert store.usage() == [(100, "nlp", 1, 1), (100, "vision", 5, 3), (101, "vision", 0, 0)]
    assert store.usage(tenant="vision", since_minute=101) == [(101, "vision", 0, 0)]


def test_the_store_survives_a_database_restart(pg):
    store = Store(pg.create_database())
    store.record([make_job("j1", 1)])
    pg.restart()  # pooled connections are now dead
    store.record([make_job("j2", 2)])
    assert store.count_jobs() == 2
    store.close()


def test_plain_postgresql_urls_use_the_installed_driver(pg):
    url = pg.create_database().replace("postgresql+psycopg://", "postgresql://")
    store = Store(url)
    store.record([make_job("j1", 1)])
    assert store.count_jobs() == 1
    store.close()


def test_a_service_on_postgresql_recovers_everything_after_a_restart(pg, tmp_path):
    from jupyter_gpusched.backends.local import LocalBackend

    (tmp_path / "root").mkdir()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    config = ServiceConfig(db_url=pg.create_database(), data_dir=tmp_path / "data", root_dir=tmp_path / "root")
    service = Service(config, LocalBackend(virtual_gpus=2))  # never ticked: everything stays queued
    ids = [service.submit(notebook="nb.ipynb", owner=f"user{i % 3}", gpus=1).id for i in range(30)]
    cancelled = service.cancel(ids[4], actor="user1")
    service.store.close()
    service.backend.close()

    again = Service(config, LocalBackend(virtual_gpus=2))
    assert sorted(again.scheduler.jobs) == sorted(ids)
    assert again.get(ids[4]).state is JobState.CANCELLED and cancelled.state is JobState.CANCELLED
    queued = [j.id for j in again.jobs(state="QUEUED")]
    assert queued == [i for i in reversed(ids) if i != ids[4]]  # same order, nothing lost or duplicated
    assert [e.dst for e in again.events(ids[4])] == [JobState.QUEUED, JobState.CANCELLED]
    assert again.store.count_jobs() == 30
    again.store.close()
    again.backend.close()


def test_schedules_and_their_runs_round_trip(store):
    row = store.schedules.add(
        dict(id="s1", owner="alice", tenant="vision", notebook="nb.ipynb", cron="0 2 * * *",
             timezone="Europe/Berlin", job={"gpus": 2, "parameters": {"lr": 0.1}}, paused=False,
             overlap="queue", catch_up="skip", created_at=1_700_000_000.0, last_run_at=None, last_job=None, note="")
    )  # fmt: skip
    assert store.schedules.get("s1") == row and row["job"] == {"gpus": 2, "parameters": {"lr": 0.1}}
    store.record([make_job("run1", 1, schedule_id="s1")])
    assert store.schedules.update("s1", last_run_at=1_700_000_060.0, last_job="run1")["last_job"] == "run1"
    (job, _), = store.load_jobs()  # fmt: skip
    assert job.spec.schedule_id == "s1"
    assert [s["id"] for s in store.schedules.all(owner="alice")] == ["s1"] and store.schedules.all(owner="bob") == []
    assert store.schedules.delete("s1") and store.schedules.get("s1") is None
