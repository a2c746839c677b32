"""A real `jupyter server` process, driven through the CLI: kill it (-9) with jobs queued
and running, start it again, and nothing acknowledged is lost or run twice at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jupyter_gpusched.testing.jupyter import LIVE_TOKEN as TOKEN
from jupyter_gpusched.testing.jupyter import new_live_server
from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(240)


def cli(port: int, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "--url", f"http://127.0.0.1:{port}/", "--token", TOKEN, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env=dict(os.environ, GPUSCHED_ROOT_DIR=str(cwd)),
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_states(port: int, cwd: Path, want: dict[str, set[str]], timeout: float = 120) -> dict[str, dict]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = {j["id"]: j for j in json.loads(cli(port, "list", "--json", cwd=cwd).stdout)}
        if all(jobs.get(i, {}).get("state") in s for i, s in want.items()):
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {want}: {jobs}")
        time.sleep(0.5)


def test_kill_and_restart_loses_nothing(tmp_path):
    server = new_live_server(tmp_path, "--GPUSched.local_gpus=1")
    root, data, port = server.root, server.data, server.port
    make_notebook(
        # long enough to be still running when the server is back (a job is RUNNING once its kernel answered)
        root / "long.ipynb",
        "import time\nprint('long start', flush=True)\ntime.sleep(20)\nprint('long done')",
    )
    make_notebook(root / "quick.ipynb", "print('quick', n)", parameters="n = 0")
    server.start()
    try:
        out = cli(port, "submit", "long.ipynb", cwd=root)
        assert out.returncode == 0, out.stderr
        long_id = out.stdout.split()[1].rstrip(":")
        quick_ids = []
        for n in (1, 2):
            out = cli(port, "submit", "quick.ipynb", "-p", f"n={n}", "--priority", "high", "--json", cwd=root)
            assert out.returncode == 0, out.stderr
            quick_ids.append(json.loads(out.stdout)["id"])
        wait_states(port, root, {long_id: {"RUNNING"}})
        runner_pid = int((data / "jobs" / long_id / "pid").read_text().split()[0])
        assert alive(runner_pid)

        server.kill()  # the server dies; the runner, in its own session, does not
        assert alive(runner_pid)

        server.start()
        deadline = time.monotonic() + 10
        while alive(runner_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(runner_pid), "the old runner was not reaped: the job would run twice"

        jobs = wait_states(port, root, {i: {"SUCCEEDED"} for i in [long_id, *quick_ids]})
        assert len(jobs) == 3
        status = cli(port, "status", long_id, cwd=root)
        assert status.returncode == 0
        assert "LOST" in status.stdout and "server stopped" in status.stdout
        events = json.loads(cli(port, "status", long_id, "--json", cwd=root).stdout)["events"]
        assert [e["to"] for e in events] == [
            "QUEUED",
            "ADMITTED",
            "RUNNING",
            "LOST",
            "QUEUED",
            "ADMITTED",
            "RUNNING",
            "SUCCEEDED",
        ]

        logs = cli(port, "logs", quick_ids[1], cwd=root)
        assert logs.returncode == 0
        out = cli(port, "output", quick_ids[1], "-o", str(tmp_path / "out.ipynb"), cwd=root)
        assert out.returncode == 0 and 'quick", 2' not in out.stdout
        assert "quick 2" in (tmp_path / "out.ipynb").read_text()

        listing = cli(port, "list", cwd=root)
        assert listing.returncode == 0 and long_id in listing.stdout and "SUCCEEDED" in listing.stdout

        bad = cli(port, "submit", "missing.ipynb", cwd=root)
        assert bad.returncode == 2 and bad.stderr.startswith("error: no notebook at") and "Traceback" not in bad.stderr
        bad = cli(port, "cancel", long_id, cwd=root)
        assert bad.returncode == 2 and "already ended" in bad.stderr
    finally:
        server.stop()


def test_cli_without_a_server_says_so(tmp_path):
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path))
    env.pop("GPUSCHED_URL", None)
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "list"], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 2
    assert out.stderr.startswith("error: no running Jupyter server found")
