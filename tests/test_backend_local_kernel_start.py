"""A kernel that starts slowly, dies before kernel_info or never answers is a launch failure, never the
notebook's: real runners, real ipykernel behind real kernel specs (jupyter_gpusched.testing.kernels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_gpusched.backends import LocalBackend
from jupyter_gpusched.backends.exitrecord import read_exit_record
from jupyter_gpusched.backends.kernelstart import StartSlot, pick_transport
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kernels import install_kernel, kernel_notebook, starts
from jupyter_gpusched.testing.service import make_service, run_until


@pytest.fixture
def kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder on JUPYTER_PATH (runners inherit it) for this test's kernel specs."""
    folder = tmp_path / "jupyter"
    monkeypatch.setenv("JUPYTER_PATH", str(folder))
    return folder


def events(service, job) -> list[tuple[JobState | None, JobState, str]]:
    return [(e.src, e.dst, e.reason) for e in service.store.events(job.id)]


def test_twelve_jobs_at_twelve_way_with_slow_kernels_all_succeed(tmp_path, kernels):
    """The burst of issue 19, small: 12 runners start 12 kernels that each take 2 s before they even
    begin; start slots (2 at once) and the load-scaled deadline bring every one up."""
    install_kernel(kernels, "slow", delay=2.0)
    kernel_notebook(tmp_path / "root" / "nb.ipynb", "slow", "print(6 * 7)")
    backend = LocalBackend(virtual_gpus=12, heartbeat_interval=0.5, max_concurrent_starts=2, kernel_start_timeout=30)
    service = make_service(tmp_path, backend)
    jobs = [service.submit(notebook="nb.ipynb", owner="me", max_retries=0) for _ in range(12)]
    try:
        run_until(service, lambda: all(j.state.terminal for j in jobs), timeout=240, what="12 slow starts")
        assert [j.state for j in jobs] == [JobState.SUCCEEDED] * 12, [service.info[j.id].message for j in jobs]
        assert all(j.lost_count == 0 for j in jobs)
    finally:
        backend.close()


def test_a_kernel_that_dies_before_kernel_info_is_retried_not_failed(tmp_path, kernels):
    spec = install_kernel(kernels, "dies-once", die_first=1)
    kernel_notebook(tmp_path / "root" / "nb.ipynb", "dies-once", "print('ran')")
    backend = LocalBackend(virtual_gpus=1, heartbeat_interval=0.5)
    service = make_service(tmp_path, backend)
    service.config.launch_backoff = 0.1
    job = service.submit(notebook="nb.ipynb", owner="me", max_retries=0)
    try:
        run_until(service, lambda: job.state.terminal, timeout=120)
    finally:
        backend.close()
    assert job.state is JobState.SUCCEEDED, service.info[job.id].message
    assert starts(spec) == 2 and job.lost_count == 0 and job.attempts == 2
    requeued = [why for src, dst, why in events(service, job) if src is JobState.ADMITTED and dst is JobState.QUEUED]
    assert len(requeued) == 1 and requeued[0].startswith("could not start: the kernel did not start: RuntimeError")
    assert "launch retry 1 of 3" in requeued[0]
    # it never ran before: its first RUNNING is after the requeue
    states = [dst for _, dst, _ in events(service, job)]
    assert states.index(JobState.RUNNING) > states.index(JobState.QUEUED, 1)


def test_a_kernel_that_never_answers_ends_as_launch_failures_then_fails_with_the_reason(tmp_path, kernels):
    """The handshake's deadline (issue 20 too): a kernel that never answers kernel_info is stopped at the
    deadline, the run is a launch failure, and after launch_retries the job fails saying why."""
    install_kernel(kernels, "mute", hang=True)
    kernel_notebook(tmp_path / "root" / "nb.ipynb", "mute", "print('never')")
    backend = LocalBackend(virtual_gpus=1, heartbeat_interval=0.5, kernel_start_timeout=1.5)
    service = make_service(tmp_path, backend)
    service.config.launch_retries, service.config.launch_backoff = 1, 0.1
    job = service.submit(notebook="nb.ipynb", owner="me", max_retries=5)
    try:
        run_until(service, lambda: job.state.terminal, timeout=120)
    finally:
        backend.close()
    assert job.state is JobState.FAILED and job.lost_count == 0 and job.attempts == 2
    assert "did not answer kernel_info within" in job.reason and "gave up after 2 tries" in job.reason
    assert JobState.RUNNING not in [dst for _, dst, _ in events(service, job)]
    record = read_exit_record(tmp_path / "data" / "jobs" / job.id)
    assert record is not None and record.status == "not_started"


def test_a_missing_kernel_still_fails_at_once(tmp_path, kernels):
    """A kernel spec that does not exist will never start: the notebook's failure, no launch retries."""
    kernel_notebook(tmp_path / "root" / "nb.ipynb", "no-such-kernel", "1")
    backend = LocalBackend(virtual_gpus=1, heartbeat_interval=0.5)
    service = make_service(tmp_path, backend)
    job = service.submit(notebook="nb.ipynb", owner="me", max_retries=0)
    try:
        run_until(service, lambda: job.state.terminal, timeout=120)
    finally:
        backend.close()
    assert job.state is JobState.FAILED and job.attempts == 1 and "no-such-kernel" in job.reason


def test_start_slots_are_exclusive_and_come_back_when_released(tmp_path):
    first, second, third = (StartSlot(tmp_path / "slots", 2) for _ in range(3))
    assert first.try_acquire() and second.try_acquire()
    assert {first.index, second.index} == {0, 1}
    assert not third.try_acquire()
    first.release()
    assert third.try_acquire() and third.index == 0


def test_ipc_transport_only_where_the_socket_names_fit(tmp_path):
    assert pick_transport("ipc", str(tmp_path / "kernel-1.json")) == "ipc"
    assert pick_transport("ipc", "/" + "x" * 120 + "/kernel-1.json") == "tcp"
    assert pick_transport("tcp", str(tmp_path / "kernel-1.json")) == "tcp"
