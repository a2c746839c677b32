"""The live service with its real store and the real local backend: health rules,
retries, zombies, leaked-GPU fencing and the demand history."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from jupyter_gpusched.backends.base import LaunchRequest
from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until

pytestmark = pytest.mark.timeout(120)


def test_silent_runner_is_lost_then_retried_to_success(tmp_path):
    service = make_service(tmp_path, heartbeat_timeout=2.0)
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(3)")
    job = service.submit(notebook="nb.ipynb", owner="me")
    run_until(service, lambda: job.state is JobState.RUNNING)
    pid = int((Path(service.info[job.id]["job_dir"]) / "pid").read_text().split()[0])
    os.kill(pid, signal.SIGSTOP)  # a hung runner: alive but silent
    run_until(service, lambda: job.lost_count == 1)
    run_until(service, lambda: job.state.terminal)
    assert job.state is JobState.SUCCEEDED
    states = [e.dst for e in service.store.events(job.id)]
    assert states.count(JobState.LOST) == 1 and states[-1] is JobState.SUCCEEDED
    service.backend.close()


def test_zombie_process_is_killed(tmp_path):
    service = make_service(tmp_path)
    nb = make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(60)")
    job_dir = tmp_path / "stray"
    job_dir.mkdir()
    service.backend.launch(LaunchRequest("stray", nb, nb.parent, {}, (0,), job_dir, None))
    assert "stray" in service.backend.running()
    service.tick()
    assert "stray" not in service.backend.running()
    service.backend.close()


class LeakyBackend(LocalBackend):
    """The real local backend, reporting GPU memory as NVML would on a machine with a GPU."""

    memory: dict = {}

    def gpu_memory_used_mib(self):
        return dict(self.memory)


def test_gpu_with_leaked_memory_is_fenced_until_clean(tmp_path):
    backend = LeakyBackend(virtual_gpus=2, heartbeat_interval=0.5)
    service = make_service(tmp_path, backend)
    make_notebook(tmp_path / "root" / "nb.ipynb", "x = 1")
    backend.memory = {("local", 1): 2048.0}
    service.tick()
    assert service.scheduler.cluster.fenced_on("local") == (1,)
    job = service.submit(notebook="nb.ipynb", owner="me", gpus=2)
    for _ in range(5):
        service.tick()
    assert job.state is JobState.QUEUED  # one of the two GPUs is fenced
    assert service.cluster()["nodes"][0]["fenced"] == [1]
    backend.memory = {}
    run_until(service, lambda: job.state.terminal)
    assert job.state is JobState.SUCCEEDED
    assert service.scheduler.cluster.fenced_on("local") == ()
    backend.close()


def test_demand_history_is_recorded_per_tenant(tmp_path):
    service = make_service(tmp_path)
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(30)")
    service.submit(notebook="nb.ipynb", owner="me", gpus=2)
    service.submit(notebook="nb.ipynb", owner="me", gpus=1)
    run_until(service, lambda: any(j.state is JobState.RUNNING for j in service.scheduler.jobs.values()))
    service._last_usage_minute = None  # force this minute's row to be written again
    service.tick()
    rows = service.store.usage(tenant="default")
    assert rows and rows[-1][2:] == (3, 2)  # 3 GPUs requested, 2 allocated
    service.backend.close()


def test_reclaim_kills_the_borrower_and_requeues_it(tmp_path):
    from jupyter_gpusched.core import Tenant

    service = make_service(tmp_path)
    service.scheduler.ledger.tenants.update({"a": Tenant("a", 1), "b": Tenant("b", 1)})
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(60)")
    borrowers = [service.submit(notebook="nb.ipynb", owner="ann", tenant="a") for _ in range(2)]
    run_until(service, lambda: all(j.state is JobState.RUNNING for j in borrowers))
    victim = next(j for j in borrowers if j.borrowed)
    owner = service.submit(notebook="nb.ipynb", owner="bob", tenant="b")
    run_until(service, lambda: owner.state is JobState.RUNNING)
    assert victim.state is JobState.QUEUED and victim.preemptions == 1
    assert victim.id not in service.backend.running()  # its process group was killed
    assert [e.dst for e in service.store.events(victim.id)][-2:] == [JobState.PREEMPTED, JobState.QUEUED]
    service.backend.close()
