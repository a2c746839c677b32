"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

pytest_plugins = ["pytest_jupyter.jupyter_server"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"


def make_notebook(path: Path, *cells: str, parameters: str | None = None, kernelspec: bool = True) -> Path:
    """Write a small real notebook; `parameters` becomes the cell tagged 'parameters'."""
    nb = nbformat.v4.new_notebook()
    if kernelspec:
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    if parameters is not None:
        cell = nbformat.v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nb.cells.extend(nbformat.v4.new_code_cell(src) for src in cells)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def gpusched_config() -> dict:
    """Override per test module to change c.GPUSched settings."""
    return {}


@pytest.fixture
def jp_server_config(tmp_path, gpusched_config):
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_gpusched": True}},
            "GPUSched": {
                "data_dir": str(tmp_path / "gpusched-data"),
                "local_gpus": 2,
                "tick_interval": 0.1,
                **gpusched_config,
            },
        }
    )


@pytest.fixture
def api(jp_fetch):
    """Call the REST API: api(method, path, body=None, **params) -> (status, json or text)."""

    async def call(method: str, path: str, body=None, raw: bytes | None = None, **params):
        kwargs = {"method": method, "raise_error": False}
        if params:
            kwargs["params"] = params
        if body is not None or raw is not None:
            kwargs["body"] = raw if raw is not None else json.dumps(body)
        elif method in ("POST", "PUT", "PATCH"):
            kwargs["body"] = b""
        r = await jp_fetch("gpusched", "api", *path.strip("/").split("/"), **kwargs)
        text = r.body.decode("utf-8", "replace")
        ctype = r.headers.get("Content-Type", "")
        return r.code, (json.loads(text) if "json" in ctype and text else text)

    return call


async def wait_for_state(api, job_id: str, states: set[str], timeout: float = 60.0) -> dict:
    """Poll a job until its state is in `states`; return it. Records every state seen."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        code, job = await api("GET", f"jobs/{job_id}")
        assert code == 200, job
        if not seen or seen[-1] != job["state"]:
            seen.append(job["state"])
        if job["state"] in states:
            job["_seen"] = seen
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} still {job['state']} after {timeout}s (seen {seen}): {job}")
        await asyncio.sleep(0.1)


# --- a real `jupyter server` process, for tests that talk to it synchronously --------------
@dataclass
class LiveServer:
    root: Path
    data: Path
    runtime: Path
    port: int
    token: str
    log: Path
    proc: subprocess.Popen | None = None
    extra_args: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 60.0) -> LiveServer:
        import requests

        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.runtime))
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--port={self.port}",
                "--ip=127.0.0.1", f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
                f"--GPUSched.data_dir={self.data}", "--GPUSched.tick_interval=0.2", *self.extra_args,
            ],
            stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                r = requests.get(f"{self.url}gpusched/api/cluster", headers={"Authorization": f"token {self.token}"}, timeout=2)
                if r.status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited early:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.3)
        raise AssertionError(f"server did not come up:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """Die without cleaning up, as a crash would (jobs' runners live on)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def new_live_server(base: Path, *extra_args: str) -> LiveServer:
    for sub in ("root", "data", "runtime"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return LiveServer(base / "root", base / "data", base / "runtime", free_port(), "live-test-token", base / "server.log", extra_args=extra_args)


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    """One real server (2 virtual GPUs) shared by a test module."""
    server = new_live_server(tmp_path_factory.mktemp("live"), "--GPUSched.local_gpus=2").start()
    yield server
    server.stop()
