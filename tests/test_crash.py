"""A server that dies never runs a job twice and never loses one: the runner's exit record tells a
restarted server how a run ended while it was down (issue 11, defect 1), and real `kill -9`s during a
burst of submissions leave every acknowledged job present once, ended, and run to its end once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from jupyter_gpusched.core import JobState
from jupyter_gpusched.service import Service
from jupyter_gpusched.testing.crash import FIRST_FINISH, CrashRun
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until
from jupyter_gpusched.testing.waits import wait_until

pytestmark = pytest.mark.timeout(300)

APPEND_ID = "import os\nwith open(os.environ['MARKS'], 'a') as f:\n    f.write(os.environ['GPUSCHED_JOB_ID'] + '\\n')"


def _crash(service: Service) -> None:
    """What a `kill -9` of the server does to it: nothing is stopped, nothing more is written, and its
    claim on the store goes with the process. (The runners live on in their own sessions.)"""
    service.store.release()


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] == "Z"  # our child, not yet waited for


@pytest.fixture
def marks(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "marks.txt"
    path.touch()
    monkeypatch.setenv("MARKS", str(path))  # the runners inherit it
    return path


def _run_then_crash(tmp_path: Path, *cells: str, max_retries: int) -> tuple[str, Path]:
    """Submit a notebook, crash the service once its runner has started, and let the runner finish alone."""
    make_notebook(tmp_path / "root" / "nb.ipynb", *cells)
    first = make_service(tmp_path)
    job = first.submit(notebook="nb.ipynb", owner="u", gpus=1, max_retries=max_retries)
    run_until(first, lambda: first.get(job.id).state is JobState.RUNNING, 60, "the job to run")
    _crash(first)
    job_dir = tmp_path / "data" / "jobs" / job.id
    pid = int((job_dir / "pid").read_text())
    wait_until(lambda: _pid_gone(pid), 60, "the runner to end on its own", 0.1)
    return job.id, job_dir


@pytest.mark.parametrize("max_retries", [0, 2])
def test_a_job_that_succeeded_while_the_server_was_down_is_not_run_again(tmp_path, marks, max_retries):
    job_id, job_dir = _run_then_crash(tmp_path, "import time\ntime.sleep(1.5)", APPEND_ID, max_retries=max_retries)
    assert json.loads((job_dir / "exit.json").read_text())["status"] == "succeeded"

    again = make_service(tmp_path)
    job = again.get(job_id)
    assert job.state is JobState.SUCCEEDED, [(e.dst, e.reason) for e in again.events(job_id)]
    assert job.lost_count == 0 and "while the server was down" in job.reason
    assert again.info[job_id].progress == [2, 2]
    for _ in range(10):  # a few passes: nothing starts it again
        again.tick()
        time.sleep(0.1)
    assert marks.read_text().split() == [job_id]
    assert [e.dst for e in again.events(job_id)] == [
        JobState.QUEUED,
        JobState.ADMITTED,
        JobState.RUNNING,
        JobState.SUCCEEDED,
    ]
    again.backend.close()


def test_a_job_that_failed_while_the_server_was_down_keeps_the_notebooks_message(tmp_path, marks):
    job_id, _ = _run_then_crash(tmp_path, APPEND_ID, "import time\ntime.sleep(1.5)\n1 / 0", max_retries=0)
    again = make_service(tmp_path)
    job = again.get(job_id)
    assert job.state is JobState.FAILED
    assert again.info[job_id].message == "ZeroDivisionError: division by zero (cell 2)"
    assert "server stopped" not in job.reason and job.lost_count == 0
    assert marks.read_text().split() == [job_id]
    again.backend.close()


def test_a_runner_stopped_after_its_last_cell_still_counts_as_finished(tmp_path, marks):
    """The restarted server kills what the last one left running. A runner that has run every cell and is
    only waiting for its kernel to exit (here: an exit hook that takes 20 s) records its success as it stops."""
    slow_exit = "import atexit, time\natexit.register(time.sleep, 20)"
    make_notebook(tmp_path / "root" / "nb.ipynb", slow_exit, APPEND_ID)
    first = make_service(tmp_path)
    job = first.submit(notebook="nb.ipynb", owner="u", gpus=1, max_retries=2)
    run_until(first, lambda: marks.read_text().strip(), 60, "the last cell to run")
    _crash(first)
    job_dir = tmp_path / "data" / "jobs" / job.id
    wait_until(lambda: json.loads((job_dir / "heartbeat").read_text())["cells_done"] == 2, 10, "the last beat")
    assert not (job_dir / "exit.json").exists()  # still shutting its kernel down

    again = make_service(tmp_path)  # reaps the runner
    assert again.get(job.id).state is JobState.SUCCEEDED, [(e.dst, e.reason) for e in again.events(job.id)]
    for _ in range(10):
        again.tick()
        time.sleep(0.1)
    assert marks.read_text().split() == [job.id]
    again.backend.close()


def test_a_job_admitted_but_never_started_goes_back_in_line_without_using_a_retry(tmp_path):
    """The server wrote the admission down and died before it launched anything."""
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    first = make_service(tmp_path)
    job = first.submit(notebook="nb.ipynb", owner="u", gpus=1, max_retries=0)
    first.scheduler.schedule(first.clock())
    first._persist([first.get(job.id)])  # as tick() does before launching
    _crash(first)

    again = make_service(tmp_path)
    assert again.get(job.id).state is JobState.QUEUED and again.get(job.id).lost_count == 0
    run_until(again, lambda: again.get(job.id).state is JobState.SUCCEEDED, 60, "the job to run once")
    again.backend.close()


def test_kill_9_during_bursts_loses_nothing_and_runs_nothing_twice(tmp_path):
    run = CrashRun(tmp_path, gpus=4, per_round=5, seconds=1.0)
    for point in (0.4, FIRST_FINISH, 2.0, FIRST_FINISH):
        run.round(point)
    counts = run.settle("all")
    assert counts.acknowledged >= 8, counts
    assert (counts.present, counts.lost, counts.duplicates) == (counts.acknowledged, 0, 0), counts
    assert (counts.run_twice, counts.not_terminal, counts.failed, counts.orphans) == (0, 0, 0, 0), counts
    log = run.server_log()
    assert "recovered" in log and "jupyter_gpusched]" in log  # the INFO line, in the server's own format
