"""One scheduler per store (issue 11, defect 2): a second service on the same data dir or database waits
as a standby, touches no job, answers 503 naming the owner, and takes over when the owner stops."""

from __future__ import annotations

import os
import signal

import pytest

from jupyter_gpusched.core import JobState
from jupyter_gpusched.service import Service, ServiceConfig
from jupyter_gpusched.service.recovery import SchedulerStandby
from jupyter_gpusched.testing.jupyter import LiveServer, new_live_server
from jupyter_gpusched.testing.net import free_port
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until
from jupyter_gpusched.testing.waits import wait_until

pytestmark = pytest.mark.timeout(240)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_second_service_on_the_same_data_dir_waits_and_touches_nothing(tmp_path):
    make_notebook(tmp_path / "root" / "long.ipynb", "import time\ntime.sleep(60)")
    first = make_service(tmp_path)
    running = first.submit(notebook="long.ipynb", owner="u", gpus=2)
    run_until(first, lambda: first.get(running.id).state is JobState.RUNNING, 60, "the job to run")
    queued = first.submit(notebook="long.ipynb", owner="u", gpus=2)
    runner = int((tmp_path / "data" / "jobs" / running.id / "pid").read_text())

    second = make_service(tmp_path)
    assert second.standby is not None
    assert f"another jupyter-gpusched scheduler (pid {os.getpid()}) owns {tmp_path / 'data'}" in second.standby
    assert second.scheduler.jobs == {}
    second.tick()
    with pytest.raises(SchedulerStandby) as refused:
        second.submit(notebook="long.ipynb", owner="u", gpus=1)
    assert refused.value.status == 503 and refused.value.message == second.standby
    assert _alive(runner)  # not reaped as an orphan
    states = {job.id: job.state for job, _ in first.store.load_jobs()}
    assert states == {running.id: JobState.RUNNING, queued.id: JobState.QUEUED}

    assert not second.take_over()  # the owner is still there
    first.backend.close()
    first.store.close()  # the owner stops (a crash frees the lock the same way)
    assert second.take_over() and second.standby is None
    assert second.get(queued.id).state is JobState.QUEUED
    second.backend.close()


def test_an_owner_whose_lock_file_is_removed_stops_scheduling(tmp_path):
    service = make_service(tmp_path)
    (tmp_path / "data" / "gpusched.lock").unlink()
    service.tick()
    assert service.standby is not None
    assert service.take_over()  # nobody else took it: owner again, on a new lock file
    assert (tmp_path / "data" / "gpusched.lock").exists()


def test_two_real_servers_on_one_data_dir(tmp_path):
    first = new_live_server(tmp_path, "--GPUSched.local_gpus=2")
    second = LiveServer(first.root, first.data, first.runtime, free_port(), first.token, tmp_path / "second.log")
    make_notebook(first.root / "quick.ipynb", "print('quick')")
    first.start()
    try:
        second.start()
        log = second.log_tail(100_000)
        line = f"another jupyter-gpusched scheduler (pid {first._process().pid}) owns {first.data}"
        assert log.count(line) == 1, log
        refused = second.api("POST", "jobs", {"notebook": "quick.ipynb"})
        assert refused.status_code == 503 and line in refused.json()["message"]

        job = first.api("POST", "jobs", {"notebook": "quick.ipynb"}).json()
        first.wait_for_state(job["id"], {"SUCCEEDED"})
        os.killpg(first._process().pid, signal.SIGKILL)  # the owner dies: the standby takes over
        first._process().wait(10)
        wait_until(lambda: second.api("POST", "jobs", {"notebook": "quick.ipynb"}).status_code == 201, 30, "takeover")
        assert second.wait_for_state(job["id"], {"SUCCEEDED"})["attempts"] == 1
    finally:
        second.stop()
        first.stop()


def test_postgresql_a_second_instance_is_a_standby_until_the_owners_session_ends(pg, tmp_path):
    from jupyter_gpusched.backends.local import LocalBackend

    url = pg.create_database()
    (tmp_path / "root").mkdir()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")

    def instance(name: str) -> Service:
        config = ServiceConfig(db_url=url, data_dir=tmp_path / name, root_dir=tmp_path / "root")
        return Service(config, LocalBackend(virtual_gpus=1))

    first = instance("a")
    job = first.submit(notebook="nb.ipynb", owner="u")
    second = instance("b")  # another data dir (another host, say): the database's lock decides
    assert second.standby is not None and f"(pid {os.getpid()}) owns postgresql+psycopg://" in second.standby
    assert not second.take_over()

    # The owner's session ends under it (its host died, the connection dropped): the standby takes over,
    # and the old owner, when it next looks, finds the lock taken and stops scheduling.
    with first.store.engine.connect() as conn:
        from sqlalchemy import text

        conn.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
            )
        )
    assert wait_until(second.take_over, 10, "the standby to take over", 0.1)
    assert second.get(job.id).state is JobState.QUEUED
    first.tick()
    assert first.standby is not None
    with pytest.raises(SchedulerStandby):
        first.submit(notebook="nb.ipynb", owner="u")
    second.store.close()  # the new owner stops: the old one takes over again
    assert first.take_over() and [j.id for j in first.jobs()] == [job.id]
    first.store.close()
    first.backend.close()
    second.backend.close()
