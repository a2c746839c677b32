"""A real JupyterHub for the hub tests and the hub load benchmark.

- `Hub`: a real JupyterHub (DummyAuthenticator, SimpleLocalProcessSpawner,
  configurable-http-proxy) with the jupyter-gpusched service registered by `configure_hub`,
  and a small admin client for its REST API (users, groups, tokens, servers).
- `ServiceClient`: the gpusched REST API as one user, with that user's token.

The service's PostgreSQL store, where wanted, comes from `testing.postgres`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from . import Unavailable
from .net import free_port
from .waits import wait_for


# --- JupyterHub --------------------------------------------------------------------------------
def proxy_command() -> str | None:
    """configurable-http-proxy: on PATH, or where scripts/ci-hub-deps.sh puts it without root."""
    found = shutil.which("configurable-http-proxy")
    if found:
        return found
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    local = cache / "jupyter-gpusched" / "chp" / "node_modules" / ".bin" / "configurable-http-proxy"
    return str(local) if os.access(local, os.X_OK) else None


@dataclass
class Hub:
    """A real JupyterHub with the gpusched service, in its own folder, on free ports.

    `groups`: {Hub group: [users]}; `admins`: Hub admin users; `gpusched`: extra
    `c.GPUSched` settings for the service; `service_args`: extra service command-line args;
    `external_service`: register the service as external (you run `start_service()`);
    `hub_config`: extra lines of ``jupyterhub_config.py`` (e.g. ``c.Spawner.poll_interval = 1``)."""

    base: Path
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    admins: Sequence[str] = ()
    gpusched: Mapping[str, Any] = field(default_factory=dict)
    service_args: Sequence[str] = ()
    external_service: bool = False
    hub_config: Sequence[str] = ()
    name: str = "gpusched"
    port: int = field(default_factory=free_port)
    hub_port: int = field(default_factory=free_port)
    proxy_api_port: int = field(default_factory=free_port)
    service_port: int = field(default_factory=free_port)
    admin_token: str = field(default_factory=lambda: uuid.uuid4().hex)
    service_token: str = field(default_factory=lambda: uuid.uuid4().hex)
    proc: subprocess.Popen | None = None
    service_proc: subprocess.Popen | None = None

    # --- layout ---------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The public (proxy) URL."""
        return f"http://127.0.0.1:{self.port}/"

    @property
    def service_url(self) -> str:
        """The service through the proxy."""
        return f"{self.url}services/{self.name}/"

    @property
    def service_direct_url(self) -> str:
        return f"http://127.0.0.1:{self.service_port}/services/{self.name}/"

    @property
    def home_template(self) -> str:
        return str(self.base / "home" / "{username}")

    def home(self, user: str) -> Path:
        return Path(self.home_template.format(username=user))

    @property
    def data_dir(self) -> Path:
        return self.base / "gpusched-data"

    @property
    def service_config(self) -> Path:
        return self.base / "jupyter_gpusched_hub_config.py"

    def write_config(self) -> None:
        from ..hub import configure_hub  # noqa: F401 - imported by the generated config

        chp = proxy_command()
        if chp is None:
            raise Unavailable(
                "configurable-http-proxy not found: `npm install -g configurable-http-proxy` (bash scripts/ci-hub-deps.sh)"
            )
        self.base.mkdir(parents=True, exist_ok=True)
        gpusched = {
            "data_dir": str(self.data_dir),
            "user_root_template": self.home_template,
            **self.gpusched,
        }
        service_lines = "\n".join(f"c.GPUSched.{k} = {v!r}" for k, v in gpusched.items())
        self.service_config.write_text(f"c = get_config()  # noqa\n{service_lines}\nc.ServerApp.allow_root = True\n")
        all_users = sorted({u for members in self.groups.values() for u in members} | set(self.admins))
        config = f"""
            import sys
            from jupyter_gpusched.hub import configure_hub

            c = get_config()  # noqa
            c.JupyterHub.ip = "127.0.0.1"
            c.JupyterHub.port = {self.port}
            c.JupyterHub.hub_ip = "127.0.0.1"
            c.JupyterHub.hub_port = {self.hub_port}
            c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.proxy_api_port}"
            c.ConfigurableHTTPProxy.command = [{chp!r}]
            c.ConfigurableHTTPProxy.pid_file = {str(self.base / "proxy.pid")!r}
            c.JupyterHub.db_url = "sqlite:///{self.base / "jupyterhub.sqlite"}"
            c.JupyterHub.cookie_secret_file = {str(self.base / "cookie_secret")!r}
            c.JupyterHub.authenticator_class = "dummy"
            c.Authenticator.admin_users = {set(self.admins)!r}
            c.Authenticator.allowed_users = {set(all_users)!r}
            c.JupyterHub.load_groups = {{g: {{"users": list(m)}} for g, m in {dict((k, list(v)) for k, v in self.groups.items())!r}.items()}}
            c.JupyterHub.spawner_class = "simple"
            c.SimpleLocalProcessSpawner.home_dir_template = {self.home_template!r}
            c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
            c.Spawner.args = ["--allow-root"]
            c.Spawner.environment = {{
                "JUPYTERHUB_SINGLEUSER_APP": "jupyter_server.serverapp.ServerApp",
                "JUPYTER_CONFIG_DIR": {str(self.base / "singleuser-config")!r},
            }}
            c.Spawner.start_timeout = 90
            c.Spawner.http_timeout = 90
            c.JupyterHub.services = [{{"name": "harness", "api_token": {self.admin_token!r}}}]
            c.JupyterHub.load_roles = [
                {{
                    "name": "harness",
                    "scopes": ["admin:users", "admin:servers", "tokens", "admin:groups", "list:users", "read:users"],
                    "services": ["harness"],
                }}
            ]
            configure_hub(
                c,
                name={self.name!r},
                port={self.service_port},
                config_file={str(self.service_config)!r},
                args={list(self.service_args)!r},
                api_token={self.service_token if self.external_service else None!r},
            )
            """
        (self.base / "jupyterhub_config.py").write_text(
            textwrap.dedent(config) + "".join(f"{line}\n" for line in self.hub_config)
        )
        # Single-user servers load only what the tests need (Voila, for the dashboard guard; not Lab or LSP).
        lean = self.base / "singleuser-config"
        lean.mkdir(exist_ok=True)
        off = {name: False for name in ("jupyterlab", "jupyter_lsp", "notebook_shim", "jupyter_server_terminals")}
        (lean / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {"jpserver_extensions": off}}))

    # --- processes --------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> Hub:
        self.write_config()
        for user in {u for m in self.groups.values() for u in m} | set(self.admins):
            self.home(user).mkdir(parents=True, exist_ok=True)
        log = open(self.base / "hub.log", "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterhub", "-f", str(self.base / "jupyterhub_config.py")],
            cwd=self.base,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for(self._hub_up, timeout, "JupyterHub")
            if self.external_service:
                self.start_service()
            wait_for(self.service_up, timeout, "the gpusched service")
        except Exception:
            self.stop()
            raise RuntimeError(f"hub did not come up:\n{self.log()}") from None
        return self

    def _hub_up(self) -> bool:
        assert self.proc is not None, "start() the hub first"
        if self.proc.poll() is not None:
            raise RuntimeError(f"jupyterhub exited ({self.proc.returncode})")
        return requests.get(f"{self.url}hub/api/", timeout=2).status_code == 200

    def service_up(self) -> bool:
        r = requests.get(f"{self.service_url}gpusched/api/cluster", timeout=2)
        return r.status_code == 403 and r.json().get("error") == "unauthenticated"

    def service_env(self) -> dict[str, str]:
        """The environment the Hub gives a managed service (for running it externally)."""
        return dict(
            os.environ,
            JUPYTERHUB_SERVICE_NAME=self.name,
            JUPYTERHUB_API_TOKEN=self.service_token,
            JUPYTERHUB_API_URL=f"http://127.0.0.1:{self.hub_port}/hub/api",
            JUPYTERHUB_BASE_URL="/",
            JUPYTERHUB_SERVICE_URL=f"http://127.0.0.1:{self.service_port}",
            JUPYTERHUB_SERVICE_PREFIX=f"/services/{self.name}/",
            JUPYTERHUB_CLIENT_ID=f"service-{self.name}",
            JUPYTERHUB_OAUTH_ACCESS_SCOPES=json.dumps([f"access:services!service={self.name}"]),
        )

    def start_service(self) -> subprocess.Popen:
        """Start the external service process (external_service=True)."""
        log = open(self.base / "service.log", "ab")
        self.service_proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter_gpusched.hub", f"--config={self.service_config}", *self.service_args],
            cwd=self.base,
            env=self.service_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self.service_proc

    def kill_service(self) -> None:
        """Crash the external service (SIGKILL to its process group: job runners live on in theirs)."""
        if self.service_proc is not None and self.service_proc.poll() is None:
            os.killpg(self.service_proc.pid, signal.SIGKILL)
            self.service_proc.wait(10)

    def stop(self) -> None:
        for proc in (self.service_proc, self.proc):
            if proc is None or proc.poll() is not None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        pid_file = self.base / "proxy.pid"
        if pid_file.exists():  # the hub normally stops its proxy; make sure
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError, PermissionError):
                pass

    def log(self, tail: int = 4000) -> str:
        out = []
        for name in ("hub.log", "service.log"):
            p = self.base / name
            if p.exists():
                out.append(f"--- {name}\n{p.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)

    # --- Hub REST API, as the harness service (an admin) ---------------------------------------------
    def api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"Authorization": f"token {self.admin_token}"}
        return requests.request(method, f"{self.url}hub/api/{path.lstrip('/')}", headers=headers, timeout=60, **kwargs)

    def create_users(self, names: Sequence[str]) -> None:
        r = self.api("POST", "users", json={"usernames": list(names)})
        assert r.status_code in (201, 409), r.text

    def token(self, user: str, scopes: Sequence[str] | None = None) -> str:
        """A new API token of `user` (all of the user's permissions unless `scopes`)."""
        body: dict[str, Any] = {"note": "gpusched test"}
        if scopes is not None:
            body["scopes"] = list(scopes)
        r = self.api("POST", f"users/{user}/tokens", json=body)
        assert r.status_code in (200, 201), r.text
        return r.json()["token"]

    def start_server(self, user: str, timeout: float = 120) -> str:
        """Start the user's server and wait until it answers; its URL through the proxy."""
        r = self.api("POST", f"users/{user}/server")
        assert r.status_code in (201, 202, 400), r.text  # 400: already running

        def ready():
            model = self.api("GET", f"users/{user}").json()
            server = model.get("servers", {}).get("")
            return server and server.get("ready")

        wait_for(ready, timeout, f"{user}'s server", interval=0.5)
        return f"{self.url}user/{user}/"

    def stop_server(self, user: str, timeout: float = 60) -> None:
        r = self.api("DELETE", f"users/{user}/server")
        assert r.status_code in (202, 204), r.text
        wait_for(
            lambda: "" not in self.api("GET", f"users/{user}").json().get("servers", {}),
            timeout,
            f"{user}'s server to stop",
        )


class ServiceClient:
    """The gpusched REST API as one user, with a token (through the proxy by default)."""

    def __init__(self, base: str, token: str | None):
        self.base = base.rstrip("/") + "/"
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"token {token}"

    def call(self, method: str, path: str, **kwargs) -> requests.Response:
        return self.session.request(method, f"{self.base}gpusched/{path.lstrip('/')}", timeout=60, **kwargs)

    def json(self, method: str, path: str, **kwargs) -> tuple[int, Any]:
        r = self.call(method, path, **kwargs)
        try:
            return r.status_code, r.json()
        except ValueError:
            return r.status_code, r.text
