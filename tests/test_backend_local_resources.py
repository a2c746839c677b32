"""Local admission respects the machine's CPUs and memory, not only its GPUs (real runners, real store)."""

from __future__ import annotations

import os
import sqlite3

from jupyter_gpusched.backends import LocalBackend
from jupyter_gpusched.core import Job, JobSpec, JobState
from jupyter_gpusched.store import Store, default_url
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until


def test_the_local_inventory_knows_the_machines_cpus_and_memory():
    node = LocalBackend(virtual_gpus=2).inventory()[0]
    assert node.cpus == os.cpu_count() and node.memory is not None and node.memory > 0
    assert LocalBackend(cpus=0, memory=0).inventory()[0].cpus is None  # 0: not counted


def test_a_job_that_would_overload_the_machine_waits(tmp_path):
    backend = LocalBackend(virtual_gpus=4, heartbeat_interval=0.5, cpus=2, memory=4096)
    service = make_service(tmp_path, backend)
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(2)")
    jobs = [service.submit(notebook="nb.ipynb", owner="me", cpus=1, memory=1024) for _ in range(3)]
    most = 0

    def count_active() -> None:
        nonlocal most
        most = max(most, sum(j.state.holds_gpus for j in jobs))

    try:
        run_until(service, lambda: all(j.state.terminal for j in jobs), timeout=180, after_tick=count_active)
    finally:
        backend.close()
    assert [j.state for j in jobs] == [JobState.SUCCEEDED] * 3
    assert most == 2, "two CPUs: two jobs of one CPU at a time, though four GPUs were free"
    stored = {j.id: j.spec for j, _ in service.store.load_jobs()}
    assert (stored[jobs[0].id].cpus, stored[jobs[0].id].memory) == (1, 1024)


def test_a_store_from_before_cpus_and_memory_gains_the_columns(tmp_path):
    url = default_url(tmp_path)
    store = Store(url)
    store.record([Job(id="old", spec=JobSpec("nb.ipynb", owner="me"), submitted_at=1.0, seq=0)])
    store.close()
    with sqlite3.connect(tmp_path / url.rsplit("/", 1)[1]) as db:  # as an earlier version left it
        db.execute("ALTER TABLE jobs DROP COLUMN cpus")
        db.execute("ALTER TABLE jobs DROP COLUMN memory")
    store = Store(url)
    [(job, _)] = list(store.load_jobs())
    assert job.id == "old" and job.spec.cpus == 0 and job.spec.memory == 0
    store.record([Job(id="new", spec=JobSpec("nb.ipynb", owner="me", cpus=2.5, memory=512), submitted_at=2, seq=1)])
    assert {j.id: (j.spec.cpus, j.spec.memory) for j, _ in store.load_jobs()}["new"] == (2.5, 512)
    store.close()
