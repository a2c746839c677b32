"""Kills run off the event loop (issue 11, defect 3): jobs whose processes ignore SIGTERM are stopped
without stalling the Jupyter server, and their GPUs go to no other job until they are dead."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from jupyter_gpusched.backends import LaunchRequest, LocalBackend
from jupyter_gpusched.backends.processes import pid_alive
from jupyter_gpusched.testing.notebooks import STUBBORN, make_notebook
from jupyter_gpusched.testing.waits import wait_for_async, wait_for_state, wait_until

pytestmark = pytest.mark.timeout(180)

MAX_LAG = 0.1  # seconds: the worst the event loop may stall while jobs are killed

# The kernel ignores SIGTERM, and so does a child that left its session (only the launch-token sweep finds
# it, and only SIGKILL after the grace period stops it). The pids go to a file the test reads.


@pytest.fixture
def gpusched_config():
    return {"local_gpus": 4}


class LagMeter:
    """A ticker on the event loop: the worst delay of a 10 ms sleep is how long the loop was stalled."""

    def __init__(self, period: float = 0.01):
        self.period = period
        self.worst = 0.0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        while True:
            t0 = time.monotonic()
            await asyncio.sleep(self.period)
            self.worst = max(self.worst, time.monotonic() - t0 - self.period)

    def __enter__(self) -> LagMeter:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc) -> None:
        assert self._task is not None
        self._task.cancel()


def read_pids(folder: Path, tag: str) -> dict[str, int] | None:
    path = folder / f"pids-{tag}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


async def test_cancelling_sigterm_ignoring_jobs_keeps_the_server_responsive(api, jp_root_dir, service):
    make_notebook(jp_root_dir / "stubborn.ipynb", STUBBORN, "time.sleep(300)", parameters="tag = 'x'")
    make_notebook(jp_root_dir / "next.ipynb", "x = 1")
    pids: dict[str, dict[str, int]] = {}
    try:
        await _cancel_stubborn_jobs(api, jp_root_dir, service, pids)
    finally:
        service.backend.close()
        _kill_leftovers(pid for p in pids.values() for pid in p.values())


async def _cancel_stubborn_jobs(api, root: Path, service, pids: dict[str, dict[str, int]]) -> None:
    ids = []
    for i in range(4):
        code, job = await api("POST", "jobs", {"notebook": "stubborn.ipynb", "parameters": {"tag": f"j{i}"}})
        assert code == 201, job
        ids.append(job["id"])
    for i, job_id in enumerate(ids):
        await wait_for_state(api, job_id, {"RUNNING"})
        pids[job_id] = {"runner": int((Path(service.info[job_id].job_dir) / "pid").read_text())}

        async def started(tag: str = f"j{i}") -> dict[str, int] | None:
            return read_pids(root, tag)

        pids[job_id].update(await wait_for_async(started, 60, "the notebook's pids"))
    # Waits for all four GPUs: it may start only once every stubborn process is dead.
    code, after = await api("POST", "jobs", {"notebook": "next.ipynb", "gpus": 4})
    assert code == 201, after
    everyone = [pid for p in pids.values() for pid in p.values()]

    last_seen_alive = 0.0

    async def all_dead() -> bool:
        nonlocal last_seen_alive
        if any(pid_alive(p) for p in everyone):
            last_seen_alive = time.time()
            return False
        return True

    with LagMeter() as meter:
        for job_id in ids:
            t0 = time.monotonic()
            code, cancelled = await api("DELETE", f"jobs/{job_id}")
            assert code == 200 and cancelled["state"] == "CANCELLED", cancelled
            assert time.monotonic() - t0 < 1.0  # the answer does not wait out the grace period
        await wait_for_async(all_dead, 30, "the stubborn jobs' processes to die", interval=0.02)
        code, job = await api("GET", f"jobs/{ids[0]}")  # the server answers throughout
        assert code == 200
    assert meter.worst < MAX_LAG, f"the event loop stalled for {meter.worst:.3f} s while killing"

    done = await wait_for_state(api, after["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "SUCCEEDED", done
    launched = json.loads((Path(service.info[after["id"]].job_dir) / "launch.json").read_text())["time"]
    assert launched > last_seen_alive, "a job was launched on GPUs whose previous job was still dying"
    for job_id in ids:
        code, log = await api("GET", f"jobs/{job_id}/log")
        assert "killed (cancelled)" in log


def _kill_leftovers(pids) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _poll_until_final(backend: LocalBackend, job_id: str, timeout: float) -> tuple[list, float]:
    """Poll until `job_id` ends; returns its updates and the longest single poll."""
    updates: list = []
    longest = 0.0

    def ended() -> bool:
        nonlocal longest
        t0 = time.monotonic()
        news = backend.poll()
        longest = max(longest, time.monotonic() - t0)
        updates.extend(u for u in news if u.job_id == job_id)
        return any(u.kind in ("succeeded", "failed") for u in updates)

    wait_until(ended, timeout, f"job {job_id} to end", 0.02)
    return updates, longest


def _launch(backend: LocalBackend, tmp_path: Path, job_id: str, *cells: str, max_runtime: float | None = None):
    nb = make_notebook(tmp_path / job_id / "nb.ipynb", *cells, parameters="tag = 'x'")
    req = LaunchRequest(job_id, nb, nb.parent, {"tag": job_id}, (0,), tmp_path / "jobs" / job_id, max_runtime)
    backend.launch(req)
    return nb.parent


def test_max_runtime_kill_does_not_block_poll_and_is_reported_once_dead(tmp_path):
    backend = LocalBackend(heartbeat_interval=0.3)
    folder = _launch(backend, tmp_path, "slow", STUBBORN, "time.sleep(300)", max_runtime=4)
    pids: dict[str, int] = {}
    try:
        pids = wait_until(lambda: read_pids(folder, "slow"), 60, "the notebook's pids")
        updates, longest = _poll_until_final(backend, "slow", 30)
        assert updates[-1].kind == "failed" and "max_runtime exceeded" in updates[-1].message
        assert not any(pid_alive(p) for p in pids.values()), "reported failed while its processes lived"
        assert longest < MAX_LAG, f"a poll took {longest:.3f} s"
        assert backend.running() == set()
    finally:
        backend.close()
        _kill_leftovers(pids.values())


def test_what_a_finished_runner_leaves_is_stopped_off_the_callers_thread(tmp_path):
    backend = LocalBackend(heartbeat_interval=0.3)
    folder = _launch(backend, tmp_path, "done", STUBBORN)  # ends at once, leaving the detached child
    pids: dict[str, int] = {}
    try:
        pids = wait_until(lambda: read_pids(folder, "done"), 60, "the notebook's pids")
        updates, longest = _poll_until_final(backend, "done", 30)
        assert updates[-1].kind == "succeeded", updates
        assert not pid_alive(pids["child"]), "reported while the job's child lived"
        assert longest < MAX_LAG, f"a poll took {longest:.3f} s"
    finally:
        backend.close()
        _kill_leftovers(pids.values())
