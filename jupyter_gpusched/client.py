"""The one HTTP client for the REST API, used by the CLI, the magic and the widgets.

It finds the server the way Jupyter tools do: an explicit URL and token, else the
environment (GPUSCHED_URL / GPUSCHED_TOKEN; inside a JupyterHub single-user server, that
server's JUPYTERHUB_SERVICE_URL with its JUPYTERHUB_API_TOKEN: it forwards to the hub's
scheduler service), else the running servers listed in the Jupyter
runtime directory (preferring the one whose root holds the current folder).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests

from .core.spec_fields import SUBMIT_FIELDS, SUBMIT_SPEC


class GPUSchedError(Exception):
    """An error from the server (or from finding it), as one readable line."""

    def __init__(self, message: str, status: int | None = None, error: str | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.error = error
        self.field = field

    def __str__(self) -> str:
        where = f" (field: {self.field})" if self.field else ""
        return f"{self.message}{where}"


def _running_servers() -> list[dict[str, Any]]:
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:  # pragma: no cover
        return []
    return list(list_running_servers())


def _hub_server() -> tuple[str, str, str | None] | None:
    """Inside a JupyterHub single-user server (a kernel or terminal there): its own URL, its
    Hub token and its root folder. The server forwards to the hub's scheduler service."""
    env = os.environ
    prefix, bind, token = (
        env.get("JUPYTERHUB_SERVICE_PREFIX"),
        env.get("JUPYTERHUB_SERVICE_URL"),
        env.get("JUPYTERHUB_API_TOKEN"),
    )
    if not (prefix and bind and token):
        return None
    parts = urlsplit(bind)
    host = parts.hostname or ""
    if host in ("", "0.0.0.0", "::", "*"):  # a bind-all address: reach it on this machine
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    path = parts.path if parts.path.rstrip("/").endswith(prefix.rstrip("/")) else prefix  # older hubs: no prefix in it
    url = urlunsplit(
        (parts.scheme or "http", f"{host}:{parts.port}" if parts.port else host, path.rstrip("/") + "/", "", "")
    )
    root = env.get("JUPYTERHUB_ROOT_DIR")
    if not root:  # the server's own runtime file knows its root
        port = parts.port
        root = next((s.get("root_dir") for s in _running_servers() if urlsplit(s.get("url", "")).port == port), None)
    return url, token, str(Path(root).expanduser()) if root else None


def _same_server(a: str, b: str) -> bool:
    """Do two base URLs name the same server (localhost and 127.0.0.1 alike)?"""
    pa, pb = urlsplit(a), urlsplit(b)
    local = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
    host_a, host_b = (pa.hostname or ""), (pb.hostname or "")
    same_host = host_a == host_b or (host_a in local and host_b in local)
    return same_host and pa.port == pb.port and pa.path.rstrip("/") == pb.path.rstrip("/")


def _root_of_local_server(url: str) -> str | None:
    """The root folder of the server at `url` when it runs on this machine (its runtime file says)."""
    return next((s.get("root_dir") for s in _running_servers() if _same_server(s.get("url", ""), url)), None)


def discover(url: str | None = None, token: str | None = None) -> tuple[str, str | None, str | None]:
    """(base URL, token, server root dir or None)."""
    url = url or os.environ.get("GPUSCHED_URL")
    token = token or os.environ.get("GPUSCHED_TOKEN")
    if url:
        url = url.rstrip("/") + "/"
        return url, token, os.environ.get("GPUSCHED_ROOT_DIR") or _root_of_local_server(url)
    hub = _hub_server()
    if hub is not None:
        return hub[0], token or hub[1], hub[2]
    servers = _running_servers()
    if not servers:
        raise GPUSchedError(
            "no running Jupyter server found; start one with `jupyter lab`, or pass --url/--token (or set GPUSCHED_URL)"
        )
    cwd = Path.cwd().resolve()

    def score(info: dict[str, Any]) -> tuple[int, int]:
        root = Path(info.get("root_dir") or info.get("notebook_dir") or "/").resolve()
        return (int(cwd.is_relative_to(root)), len(root.parts))

    best = max(servers, key=score)
    return best["url"].rstrip("/") + "/", token or best.get("token") or None, best.get("root_dir")


class Client:
    def __init__(
        self, url: str | None = None, token: str | None = None, root_dir: str | None = None, timeout: float = 30.0
    ):
        found_url, found_token, found_root = discover(url, token)
        self.url = found_url
        self.root_dir = root_dir or found_root
        self.timeout = timeout
        self.session = requests.Session()
        if found_token:
            self.session.headers["Authorization"] = f"token {found_token}"

    def _api(self, path: str) -> str:
        return f"{self.url}gpusched/api/{path.lstrip('/')}"

    def _request(self, method: str, path: str, **kwargs) -> requests.Response:
        try:
            r = self.session.request(method, self._api(path), timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise GPUSchedError(f"cannot reach the Jupyter server at {self.url}: {exc.__class__.__name__}") from None
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = {}
            if r.status_code in (401, 403) and not body.get("message"):
                body["message"] = "not authorized: pass the server's token (--token or GPUSCHED_TOKEN)"
            raise GPUSchedError(
                body.get("message") or f"HTTP {r.status_code} from {path}",
                r.status_code,
                body.get("error"),
                body.get("field"),
            )
        return r

    # --- notebook paths ---------------------------------------------------------------
    def server_path(self, notebook: str | os.PathLike) -> str:
        """A local notebook path as the server sees it (relative to its root)."""
        p = Path(notebook)
        if self.root_dir is None:
            return p.as_posix()
        root = Path(self.root_dir).resolve()
        full = (Path.cwd() / p).resolve() if not p.is_absolute() else p.resolve()
        if not full.is_relative_to(root):
            raise GPUSchedError(f"{notebook} is outside the server's root folder {root}", field="notebook")
        return full.relative_to(root).as_posix()

    # --- API -------------------------------------------------------------------------------
    def submit(self, notebook: str, **fields: Any) -> dict[str, Any]:
        """Queue a notebook; `fields` are the other job-spec fields (core/spec_fields.py), None meaning the
        server's default."""
        unknown = sorted(set(fields) - SUBMIT_FIELDS)
        if unknown:
            allowed = ", ".join(f.name for f in SUBMIT_SPEC)
            raise GPUSchedError(f"unknown submit field {unknown[0]!r}; the fields are {allowed}", field=unknown[0])
        body = {"notebook": self.server_path(notebook), **{k: v for k, v in fields.items() if v is not None}}
        return self._request("POST", "jobs", json=body).json()

    def submit_pipeline(self, steps: list[dict[str, Any]], edges: list[list[int]]) -> dict[str, Any]:
        """Submit a DAG of jobs at once (docs/pipelines.md): `steps` are submit bodies (notebook paths as
        for `submit`), an edge [i, j] makes step j wait for step i."""
        return self._request("POST", "pipelines", json={"steps": self._server_steps(steps), "edges": edges}).json()

    def _server_steps(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Pipeline steps with notebook paths as the server names them (see `server_path`)."""
        return [
            {**step, "notebook": self.server_path(step["notebook"])} if "notebook" in step else step for step in steps
        ]

    def run_pipeline_file(self, path: str | os.PathLike) -> dict[str, Any]:
        """Submit the pipeline a YAML or JSON file describes: `steps` (each a submit body; notebook paths
        relative to the file's folder) and `edges`."""
        spec = self.read_pipeline_file(path)
        return self.submit_pipeline(spec["steps"], spec["edges"])

    @staticmethod
    def read_pipeline_file(path: str | os.PathLike) -> dict[str, Any]:
        """`{"steps", "edges"}` from a YAML or JSON pipeline file, notebook paths made relative to the
        current folder (they are relative to the file's folder in it)."""
        import yaml  # YAML is a superset of JSON: one reader for both

        file = Path(path)
        try:
            spec = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise GPUSchedError(f"cannot read the pipeline file {path}: {exc}", field="file") from None
        if not isinstance(spec, dict) or not isinstance(spec.get("steps"), list):
            raise GPUSchedError(f"{path}: a pipeline file holds `steps` (a list) and `edges`", field="steps")
        steps = [
            {**step, "notebook": os.path.normpath(file.parent / step["notebook"])}
            if isinstance(step, dict) and isinstance(step.get("notebook"), str)
            else step
            for step in spec["steps"]
        ]
        return {"steps": steps, "edges": spec.get("edges") or []}

    def pipeline(self, pipeline_id: str) -> dict[str, Any]:
        return self._request("GET", f"pipelines/{quote(pipeline_id, safe='')}").json()

    def jobs(self, state: str | None = None, tenant: str | None = None, mine: bool = False) -> list[dict[str, Any]]:
        params = {k: v for k, v in {"state": state, "tenant": tenant, "mine": "true" if mine else None}.items() if v}
        return self._request("GET", "jobs", params=params).json()["jobs"]

    def get(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"jobs/{quote(job_id, safe='')}").json()

    def cancel(self, job_id: str) -> dict[str, Any]:
        return self._request("DELETE", f"jobs/{quote(job_id, safe='')}").json()

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return self._request("GET", f"jobs/{quote(job_id, safe='')}/events").json()["events"]

    def log(self, job_id: str, offset: int = 0) -> tuple[str, int]:
        """Log text from byte `offset`, and the offset to ask for next. A log that is now shorter than
        `offset` was trimmed on the server (its head dropped past the size cap): read it again from its
        new start, whose first line says what was dropped."""
        path = f"jobs/{quote(job_id, safe='')}/log"
        try:
            r = self._request("GET", path, params={"offset": offset})
        except GPUSchedError as err:
            if err.status != 416 or offset == 0:
                raise
            offset = 0
            r = self._request("GET", path, params={"offset": 0})
        return r.content.decode("utf-8", "replace"), int(r.headers.get("X-Log-Offset", offset + len(r.content)))

    def output(self, job_id: str) -> bytes:
        return self._request("GET", f"jobs/{quote(job_id, safe='')}/output").content

    def queues(self) -> dict[str, Any]:
        return self._request("GET", "queues").json()

    def cluster(self) -> dict[str, Any]:
        return self._request("GET", "cluster").json()

    def usage(self, minutes: int = 24 * 60, tenant: str | None = None) -> dict[str, Any]:
        params = {"minutes": minutes, **({"tenant": tenant} if tenant else {})}
        return self._request("GET", "usage", params=params).json()

    def usage_report(self, period: str = "month", by: str = "tenant", fmt: str = "json", bucket: str = "period") -> Any:
        """Showback this period (docs/budgets.md): a dict, or the CSV text with fmt="csv";
        bucket="day" adds each day's rows."""
        params = {"period": period, "by": by, "format": fmt, **({"bucket": bucket} if bucket != "period" else {})}
        r = self._request("GET", "usage/report", params=params)
        return r.text if fmt == "csv" else r.json()

    def interactive_usage(self) -> dict[str, Any]:
        """GPU kernels' GPU-hours per user: held, executing, idle reclaimed (docs/interactive.md)."""
        return self._request("GET", "interactive").json()

    def me(self) -> dict[str, Any]:
        """Who the scheduler takes this client for: name, admin, tenants."""
        return self._request("GET", "me").json()

    def notify_settings(self, targets: list[Any] | None | bool = False) -> dict[str, Any]:
        """The caller's default notification targets; with `targets`, set them first (None forgets them)."""
        if targets is not False:
            return self._request("PUT", "settings/notify", json={"notify": targets}).json()
        return self._request("GET", "settings/notify").json()

    def scaling(self) -> dict[str, Any] | None:
        """Recommended pool sizes from the forecast, or None where the server has none."""
        try:
            return self._request("GET", "scaling").json()
        except GPUSchedError as exc:
            if exc.status == 404 and exc.error == "not_found" and exc.field is None:
                return None
            raise

    def forecast(self, **params: Any) -> dict[str, Any] | None:
        """The server's demand forecast, or None where the server has no forecaster."""
        try:
            return self._request("GET", "forecast", params=params).json()
        except GPUSchedError as exc:
            if exc.status == 404 and exc.error == "not_found" and exc.field is None:
                return None
            raise

    # --- recurring schedules (docs/schedules.md) -------------------------------------------------
    def add_schedule(self, notebook: str, cron: str, timezone: str = "UTC", **fields: Any) -> dict[str, Any]:
        """A schedule running `notebook` at each `cron` time in `timezone`; `fields`: job-spec fields and
        the schedule's rules (paused, overlap, catch_up), None meaning the server's default."""
        body = {"notebook": self.server_path(notebook), "cron": cron, "timezone": timezone}
        body.update({k: v for k, v in fields.items() if v is not None})
        return self._request("POST", "schedules", json=body).json()

    def add_pipeline_schedule(
        self, path: str | os.PathLike, cron: str, timezone: str = "UTC", **rules: Any
    ) -> dict[str, Any]:
        """A schedule running the pipeline file `path` (as `run_pipeline_file` reads it) at each `cron`
        time; `rules`: paused, overlap, catch_up (None: the server's default)."""
        spec = self.read_pipeline_file(path)
        pipeline = {"steps": self._server_steps(spec["steps"]), "edges": spec["edges"]}
        body = {"pipeline": pipeline, "cron": cron, "timezone": timezone}
        body.update({k: v for k, v in rules.items() if v is not None})
        return self._request("POST", "schedules", json=body).json()

    def schedules(self, mine: bool = False) -> list[dict[str, Any]]:
        return self._request("GET", "schedules", params={"mine": "true"} if mine else {}).json()["schedules"]

    def schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._request("GET", f"schedules/{quote(schedule_id, safe='')}").json()

    def update_schedule(self, schedule_id: str, **changes: Any) -> dict[str, Any]:
        """Pause (paused=True), resume (paused=False) or edit a schedule."""
        return self._request("PATCH", f"schedules/{quote(schedule_id, safe='')}", json=changes).json()

    def delete_schedule(self, schedule_id: str) -> dict[str, Any]:
        return self._request("DELETE", f"schedules/{quote(schedule_id, safe='')}").json()

    def schedule_jobs(self, schedule_id: str) -> list[dict[str, Any]]:
        return self._request("GET", f"schedules/{quote(schedule_id, safe='')}/jobs").json()["jobs"]

    def schedule_preview(self, cron: str, timezone: str = "UTC") -> dict[str, Any]:
        return self._request("GET", "schedules/preview", params={"cron": cron, "timezone": timezone}).json()
