"""The pytest plugin: fixtures for a real Jupyter server with the extension on.

Load it from a conftest.py, after pytest-jupyter's server plugin (whose `jp_server_config` it overrides):

    pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_gpusched.testing.plugin"]

- `gpusched_config`: extra c.GPUSched settings; override it in a test module (or parametrize it, indirect).
- `jp_server_config`: pytest-jupyter's in-process server with the extension, 2 virtual GPUs, a quick tick.
- `api`: the REST API of that server, `await api(method, path, body=None, **params) -> (status, json or text)`.
- `service`: that server's live service.
- `live_server`: a real `jupyter server` process (2 virtual GPUs) shared by a test module.
- `kueue`: a kwok test cluster with a real Kueue manager on it, shared by a test module (`testing.kueue`).
"""

from __future__ import annotations

import contextlib
import json

import pytest
from traitlets.config import Config

from ..server.settings import SETTINGS_KEY
from . import Unavailable
from .jupyter import new_live_server
from .postgres import PostgresServer


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


@pytest.fixture
def service(jp_serverapp):
    """The live service of pytest-jupyter's server (its store, scheduler and backend)."""
    return jp_serverapp.web_app.settings[SETTINGS_KEY].service


@pytest.fixture(scope="module")
def live_server(tmp_path_factory):
    """One real server (2 virtual GPUs) shared by a test module."""
    server = new_live_server(tmp_path_factory.mktemp("live"), "--GPUSched.local_gpus=2").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pg():
    """A real PostgreSQL server for the module's tests (skips them where PostgreSQL is not installed)."""
    try:
        server = PostgresServer().start()
    except Unavailable as exc:
        pytest.skip(str(exc))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kueue(tmp_path_factory):
    """A started kwok test cluster (`testing.kwok.NODES`) with a real Kueue manager on it, for a test module:
    a `testing.kueue.Kueue` (`.cluster` is the KwokCluster, `.api` a client). Skips where the control plane or
    Kueue is not built (Kueue's cold build takes about 40 minutes, so CI does not build it)."""
    from .kueue import kueue_binary, running_kueue
    from .kwok import control_plane_built, running_cluster

    if not control_plane_built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    if kueue_binary() is None:
        pytest.skip("Kueue is not built; run `bash scripts/kueue.sh build` (about 40 minutes)")
    folder = tmp_path_factory.mktemp("kueue")
    with contextlib.ExitStack() as stack:
        cluster = stack.enter_context(running_cluster(folder / "cluster"))
        try:
            k = stack.enter_context(running_kueue(cluster, folder / "kueue"))
        except Unavailable as exc:  # e.g. its metrics certificate cannot be written here
            pytest.skip(str(exc))
        yield k
