"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import nbformat
import pytest
from traitlets.config import Config

pytest_plugins = ["pytest_jupyter.jupyter_server"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"


def make_notebook(path: Path, *cells: str, parameters: str | None = None) -> Path:
    """Write a small real notebook; `parameters` becomes the cell tagged 'parameters'."""
    nb = nbformat.v4.new_notebook()
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
