"""The live service with its real store and the real local backend: health rules,
retries, zombies, leaked-GPU fencing, the demand history and failed launches."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from jupyter_gpusched.backends.base import BackendError, LaunchRequest
from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.service import LaunchRefused, Service
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until, service_in

pytestmark = pytest.mark.timeout(120)


def test_silent_runner_is_lost_then_retried_to_success(tmp_path):
    service = make_service(tmp_path, heartbeat_timeout=2.0)
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(3)")
    job = service.submit(notebook="nb.ipynb", owner="me")
    run_until(service, lambda: job.state is JobState.RUNNING)
    pid = int((Path(service.info[job.id].job_dir) / "pid").read_text().split()[0])
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


class FlakyBackend(LocalBackend):
    """The real local backend behind an infrastructure that refuses the first `failures` launches."""

    def __init__(self, failures: int, refusal: type[Exception] = BackendError, **kwargs):
        super().__init__(**kwargs)
        self.failures = failures
        self.refusal = refusal
        self.launches = 0

    def launch(self, req):
        self.launches += 1
        if self.launches <= self.failures:
            raise self.refusal("the node's container runtime is not answering")
        return super().launch(req)


def flaky_service(tmp_path: Path, backend: LocalBackend, **launch) -> Service:
    return service_in(tmp_path, backend, **launch)


def test_a_failed_launch_puts_the_job_back_in_line_after_a_pause(tmp_path):
    backend = FlakyBackend(2, virtual_gpus=2, heartbeat_interval=0.5)
    service = flaky_service(tmp_path, backend, launch_retries=3, launch_backoff=1.0)
    make_notebook(tmp_path / "root" / "nb.ipynb", "x = 1")
    job = service.submit(notebook="nb.ipynb", owner="me", max_retries=0)
    service.tick()
    assert job.state is JobState.ADMITTED and "launch retry 1 of 3 in 1 s" in service.info[job.id].message
    service.tick()
    assert job.state is JobState.ADMITTED, "back in line only after the pause"
    run_until(service, lambda: job.state.terminal)
    assert job.state is JobState.SUCCEEDED and backend.launches == 3 and job.lost_count == 0
    requeues = [e for e in service.store.events(job.id) if e.src is JobState.ADMITTED and e.dst is JobState.QUEUED]
    assert [e.reason for e in requeues] == [
        "could not start: the node's container runtime is not answering (launch retry 1 of 3 in 1 s)",
        "could not start: the node's container runtime is not answering (launch retry 2 of 3 in 2 s)",
    ]
    assert requeues[1].time - requeues[0].time >= 2  # the pause doubles
    assert service.info[job.id].launch_failures == 0  # a launch that went through resets the count
    backend.close()


def test_launches_that_keep_failing_fail_the_job_with_the_reason(tmp_path):
    backend = FlakyBackend(100, virtual_gpus=2, heartbeat_interval=0.5)
    service = flaky_service(tmp_path, backend, launch_retries=2, launch_backoff=0.05)
    make_notebook(tmp_path / "root" / "nb.ipynb", "x = 1")
    job = service.submit(notebook="nb.ipynb", owner="me")
    run_until(service, lambda: job.state.terminal)
    assert job.state is JobState.FAILED and backend.launches == 3
    assert job.reason == "could not start: the node's container runtime is not answering (gave up after 3 tries)"
    assert service.scheduler.cluster.free_gpus == 2
    backend.close()


def test_a_launch_the_backend_refuses_for_good_fails_at_once(tmp_path):
    backend = FlakyBackend(100, LaunchRefused, virtual_gpus=2, heartbeat_interval=0.5)
    service = flaky_service(tmp_path, backend, launch_backoff=0.05)
    make_notebook(tmp_path / "root" / "nb.ipynb", "x = 1")
    job = service.submit(notebook="nb.ipynb", owner="me")
    service.tick()
    assert job.state is JobState.FAILED and backend.launches == 1
    assert job.reason == "could not start: the node's container runtime is not answering"
    backend.close()


def test_stop_returns_when_a_kick_races_it(tmp_path):
    # Python 3.11's asyncio.wait_for returns, instead of raising, when the task waiting in it is
    # cancelled just as what it waits for completes: a kick (a DELETE) right before stop() made
    # the loop run on and stop() hang (a server test's teardown, once in a CI run).
    async def main():
        service = make_service(tmp_path)
        service.start()
        await asyncio.sleep(0.3)  # the loop waits for its next tick
        service.kick()
        stopping = asyncio.ensure_future(service.stop())
        done, _ = await asyncio.wait({stopping}, timeout=5)  # (asyncio.wait cancels nothing)
        if not done:  # let the test end: a second cancel is not swallowed
            stopping.cancel()
            await asyncio.wait({stopping})
        service.backend.close()
        return bool(done)

    assert asyncio.run(main()), "stop() did not return: the loop ran on after it was cancelled"
