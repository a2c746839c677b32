"""A real Jupyter server with the extension on, as a subprocess the tests talk to over HTTP:
`LiveServer` (`jupyter server`) and `Lab` (`jupyter lab` set up for the browser tests)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import requests

from .net import free_port
from .notebooks import make_notebook
from .waits import wait_for, wait_until

LIVE_TOKEN = "live-test-token"


@dataclass
class LiveServer:
    """`python -m <app>` with the extension on, in its own session (so a kill reaches everything it started)."""

    root: Path
    data: Path
    runtime: Path
    port: int
    token: str
    log: Path
    proc: subprocess.Popen | None = None
    extra_args: tuple[str, ...] = ()
    app: str = "jupyter_server"  # the module to run: jupyter_server or jupyterlab
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's environment

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 60.0) -> LiveServer:
        command = [
            sys.executable, "-m", self.app, "--no-browser", "--allow-root", f"--port={self.port}", "--ip=127.0.0.1",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            f"--GPUSched.data_dir={self.data}", "--GPUSched.tick_interval=0.2", *self.extra_args,
        ]  # fmt: skip
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.runtime), **self.env)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        wait_for(
            self._answers,
            timeout,
            lambda: f"{self.app} to answer on {self.url}; its log:\n{self.log_tail()}",
            interval=0.3,
            retry_on=(requests.ConnectionError,),
        )
        return self

    def _process(self) -> subprocess.Popen:
        assert self.proc is not None, "start() the server first"
        return self.proc

    def _answers(self) -> bool:
        if self._process().poll() is not None:
            raise AssertionError(f"{self.app} exited early:\n{self.log_tail()}")
        r = self.api("GET", "cluster", timeout=2)
        if r.status_code == 404:
            raise AssertionError(f"jupyter-gpusched's server extension is not enabled:\n{self.log_tail()}")
        return r.status_code in (200, 503)  # 503: the extension answers, as a standby

    def kill(self) -> None:
        """Die without cleaning up, as a crash would (jobs' runners live on)."""
        proc = self._process()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(20)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def api(self, method: str, path: str, body: dict | None = None, timeout: float = 10) -> requests.Response:
        """One request to the REST API (gpusched/api/<path>) with the server's token."""
        return requests.request(
            method,
            f"{self.url}gpusched/api/{path}",
            json=body,
            headers={"Authorization": f"token {self.token}"},
            timeout=timeout,
        )

    def wait_for_state(self, job_id: str, states: set[str], timeout: float = 90) -> dict:
        """Poll a job until its state is in `states`; return it."""
        last: dict = {}

        def reached() -> dict | None:
            nonlocal last
            last = self.api("GET", f"jobs/{job_id}").json()
            return last if last["state"] in states else None

        return wait_until(
            reached, timeout, lambda: f"job {job_id} (is {last.get('state')}) to be in {states}: {last}", 0.2
        )

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


def new_live_server(base: Path, *extra_args: str) -> LiveServer:
    """A LiveServer (not started) with its root, job store and runtime folders under `base`."""
    for sub in ("root", "data", "runtime"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    return LiveServer(
        base / "root",
        base / "data",
        base / "runtime",
        free_port(),
        LIVE_TOKEN,
        base / "server.log",
        extra_args=extra_args,
    )


class Lab(LiveServer):
    """`jupyter lab` in a throwaway root, with its own settings, workspaces and job store (2 virtual GPUs),
    and the three notebooks the browser tests drive: train (parameters seconds and lr), other, blocker."""

    def __init__(self, base: Path):
        settings = base / "settings"
        super().__init__(
            root=base / "root",
            data=base / "gpusched-data",
            runtime=base / "runtime",
            port=free_port(),
            token=secrets.token_hex(16),
            log=base / "lab.log",
            # a webhook secret, so "Notify me" can take a webhook URL
            extra_args=(
                "--GPUSched.local_gpus=2",
                "--LabApp.expose_app_in_browser=True",
                "--GPUSched.webhook_secret=browser-test-secret",
            ),
            app="jupyterlab",
            env={
                "JUPYTERLAB_SETTINGS_DIR": str(settings),
                "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
                "JUPYTER_CONFIG_DIR": str(base / "config"),
            },
        )
        make_notebook(
            self.root / "train.ipynb",
            "import time\nfor step in range(3):\n    print(f'step {step} lr={lr}', flush=True)\n    time.sleep(seconds / 3)",
            "print('trained with', lr)",
            parameters="seconds = 3.0  # how long to train\nlr = 0.1",
        )
        make_notebook(self.root / "other.ipynb", "print('other', x)", parameters="x = 1")
        make_notebook(self.root / "blocker.ipynb", "import time\ntime.sleep(seconds)", parameters="seconds = 6")
        self._write(settings / "jupyter-gpusched" / "plugin.jupyterlab-settings", {"refreshInterval": 1})
        # no "would you like news?" toast over the panel
        self._write(
            settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
            {"fetchNews": "false", "checkForUpdates": False},
        )

    def start(self, timeout: float = 90.0) -> Lab:
        super().start(timeout)
        return self

    @staticmethod
    def _write(path: Path, data: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
