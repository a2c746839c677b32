"""Hostile input gets a 4xx JSON error and changes nothing; a notebook swapped for a link after
submission is never run (issue 11: defects 5 to 8)."""

from __future__ import annotations

import os

import pytest

from jupyter_gpusched.backends import LocalBackend
from jupyter_gpusched.backends.base import LaunchRefused, validate_parameters
from jupyter_gpusched.backends.containment import notebook_at_launch
from jupyter_gpusched.core.model import Pool
from jupyter_gpusched.core.parameters import MAX_PARAMETER_DEPTH, check_parameters
from jupyter_gpusched.core.scheduler import SpecError
from jupyter_gpusched.server.routes import answer_long_request_lines
from jupyter_gpusched.server.validation import ApiError, check_gpu_type
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def gpusched_config():
    return {"pools": {"local": {"gpu_type": "virtual"}}}


@pytest.fixture
def files(jp_root_dir):
    make_notebook(jp_root_dir / "ok.ipynb", "x = 1")
    os.symlink("loop.ipynb", jp_root_dir / "loop.ipynb")  # a link to itself
    return jp_root_dir


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


HOSTILE = [
    # (case, body (dict) or raw bytes, status, error, field)
    ("100,000 [", b"[" * 100_000, 400, "bad_json", None),
    ("100,000 [ in parameters", b'{"notebook": "ok.ipynb", "parameters": {"x": ' + b"[" * 100_000, 400, "bad_json", None),
    ("NUL in notebook", {"notebook": "hello\u0000.ipynb"}, 400, "invalid_value", "notebook"),
    ("lone surrogate in notebook", b'{"notebook": "\\ud800.ipynb"}', 400, "invalid_value", "notebook"),
    ("escaped surrogate in notebook", b'{"notebook": "\\udc80.ipynb"}', 400, "invalid_value", "notebook"),
    ("name over 255 bytes", {"notebook": "a" * 300 + ".ipynb"}, 400, "invalid_value", "notebook"),
    ("path over 4096 bytes", {"notebook": "/".join(["d" * 100] * 45) + "/x.ipynb"}, 400, "invalid_value", "notebook"),
    ("symlink loop", {"notebook": "loop.ipynb"}, 400, "invalid_value", "notebook"),
    ("file as a folder", {"notebook": "ok.ipynb/x.ipynb"}, 400, "not_found", "notebook"),
    ("max_runtime 1e400 whole", b'{"notebook": "ok.ipynb", "max_runtime": 1' + b"0" * 400 + b"}", 400,
     "invalid_value", "max_runtime"),
    ("max_runtime 1e400", b'{"notebook": "ok.ipynb", "max_runtime": 1e400}', 400, "invalid_value", None),
    ("max_runtime over a year", {"notebook": "ok.ipynb", "max_runtime": 1e300}, 400, "invalid_value", "max_runtime"),
    ("NaN parameter", b'{"notebook": "ok.ipynb", "parameters": {"x": NaN}}', 400, "invalid_value", None),
    ("Infinity parameter", b'{"notebook": "ok.ipynb", "parameters": {"x": -Infinity}}', 400, "invalid_value", None),
    ("surrogate parameter", b'{"notebook": "ok.ipynb", "parameters": {"x": "\\udc80"}}', 400, "invalid_value",
     "parameters"),
    ("parameters too deep", {"notebook": "ok.ipynb", "parameters": {"x": nested(MAX_PARAMETER_DEPTH + 1)}}, 400,
     "invalid_value", "parameters.x"),
    ("parameters over 64 KiB", {"notebook": "ok.ipynb", "parameters": {"x": "a" * 70_000}}, 413, "too_large",
     "parameters"),
    ("body over 1 MiB", {"notebook": "ok.ipynb", "parameters": {"x": "a" * 1_100_000}}, 413, "too_large", None),
    ("unknown gpu_type", {"notebook": "ok.ipynb", "gpu_type": "h100"}, 400, "invalid_value", "gpu_type"),
    ("1,000-character gpu_type", {"notebook": "ok.ipynb", "gpu_type": "x" * 1000}, 400, "invalid_value", "gpu_type"),
    ("tenant over 255", {"notebook": "ok.ipynb", "tenant": "t" * 300}, 400, "invalid_value", "tenant"),
    ("NUL in tenant", {"notebook": "ok.ipynb", "tenant": "a\u0000b"}, 400, "invalid_value", "tenant"),
]  # fmt: skip


@pytest.mark.parametrize("case,body,status,error,field", HOSTILE, ids=[c[0] for c in HOSTILE])
async def test_hostile_submit_is_a_4xx_and_changes_nothing(api, files, case, body, status, error, field):
    if isinstance(body, bytes):
        code, resp = await api("POST", "jobs", raw=body)
    else:
        code, resp = await api("POST", "jobs", body)
    assert code == status, resp
    assert set(resp) == {"error", "message", "field"}, resp
    assert (resp["error"], resp["field"]) == (error, field), resp
    assert resp["message"] and "Traceback" not in resp["message"] and len(resp["message"]) < 600, resp
    code, listing = await api("GET", "jobs")
    assert listing["jobs"] == []


async def test_an_unknown_gpu_type_is_refused_with_the_clusters_types(api, files):
    code, resp = await api("POST", "jobs", {"notebook": "ok.ipynb", "gpu_type": "h100"})
    assert code == 400 and "virtual" in resp["message"], resp
    code, job = await api("POST", "jobs", {"notebook": "ok.ipynb", "gpu_type": "virtual", "parameters": {"x": 1.5}})
    assert code == 201, job
    await wait_for_state(api, job["id"], {"SUCCEEDED"})


def test_the_server_and_the_runner_apply_one_parameter_rule():
    deepest = {"x": nested(MAX_PARAMETER_DEPTH)}
    assert check_parameters(deepest) == validate_parameters(deepest) == deepest
    for bad in ({"x": nested(MAX_PARAMETER_DEPTH + 1)}, {"x": float("nan")}, {"x": float("inf")}, {"x": "a" * 70_000}):
        with pytest.raises(SpecError):
            check_parameters(bad)
        with pytest.raises(ValueError):
            validate_parameters(bad)  # what the runner calls at launch


async def test_unknown_api_paths_authenticate_first(jp_http_port, jp_base_url, api):
    from tornado.httpclient import AsyncHTTPClient

    url = f"http://localhost:{jp_http_port}{jp_base_url}gpusched/api/no/such/thing"
    r = await AsyncHTTPClient().fetch(url, raise_error=False)
    assert r.code == 403, r.body
    code, resp = await api("GET", "no/such/thing")
    assert code == 404 and resp["error"] == "not_found", resp


@pytest.mark.parametrize(
    "method,path,allow",
    [("PUT", "jobs", "GET, POST, OPTIONS"), ("POST", "jobs/abc", "GET, DELETE, OPTIONS"), ("DELETE", "cluster", None)],
)
async def test_405_names_the_allowed_methods(jp_fetch, method, path, allow):
    r = await jp_fetch("gpusched", "api", *path.split("/"), method=method, raise_error=False, allow_nonstandard_methods=True,
                       body=b"{}" if method in ("PUT", "POST") else None)  # fmt: skip
    assert r.code == 405, r.body
    assert r.headers["Allow"] == (allow or "GET, OPTIONS")


async def test_an_over_long_job_id_gets_an_answer(api, http_server):
    code, resp = await api("GET", "jobs/" + "a" * 65)
    assert code == 404 and resp["error"] == "not_found" and len(resp["message"]) < 300, resp
    code, resp = await api("GET", "jobs/" + "a" * 10_000)
    assert code == 414 and resp["error"] == "uri_too_long", resp
    answer_long_request_lines(http_server)  # what the extension does when it starts (the test's own server here)
    code, resp = await api("GET", "jobs/" + "a" * 70_000)
    assert code == 414 and resp["error"] == "uri_too_long", resp


async def test_mine_is_a_boolean(api):
    for value in ("true", "false", "1", "0"):
        code, _ = await api("GET", "jobs", mine=value)
        assert code == 200
    code, resp = await api("GET", "jobs", mine="maybe")
    assert code == 400 and resp["field"] == "mine", resp


# --- defect 5: the notebook is checked again at launch -------------------------------------------------
@pytest.mark.parametrize("swap", ["file", "folder"])
async def test_a_notebook_swapped_for_a_link_after_submit_is_not_run(api, jp_root_dir, tmp_path, swap):
    marker = tmp_path / "ran-outside"
    outside = make_notebook(tmp_path / "outside" / "work" / "nb.ipynb", f"open({str(marker)!r}, 'w').write('x')")
    make_notebook(jp_root_dir / "work" / "nb.ipynb", "x = 1")
    make_notebook(jp_root_dir / "hold.ipynb", "import time; time.sleep(30)")
    code, holder = await api("POST", "jobs", {"notebook": "hold.ipynb", "gpus": 2})
    await wait_for_state(api, holder["id"], {"RUNNING"})
    code, queued = await api("POST", "jobs", {"notebook": "work/nb.ipynb"})
    assert code == 201, queued
    if swap == "file":
        (jp_root_dir / "work" / "nb.ipynb").unlink()
        os.symlink(outside, jp_root_dir / "work" / "nb.ipynb")
    else:
        os.rename(jp_root_dir / "work", jp_root_dir / "work-old")
        os.symlink(outside.parent, jp_root_dir / "work")
    await api("DELETE", f"jobs/{holder['id']}")
    done = await wait_for_state(api, queued["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "FAILED" and "replaced by a link" in done["message"], done
    assert not marker.exists()


def test_notebook_at_launch(tmp_path):
    root = tmp_path / "root"
    nb = make_notebook(root / "a" / "nb.ipynb", "x = 1")
    assert notebook_at_launch(root, "a/nb.ipynb") == nb
    assert notebook_at_launch(tmp_path, nb) == nb  # hub mode: an absolute path, checked as it is
    assert notebook_at_launch(root, "a/gone.ipynb") == root / "a" / "gone.ipynb"  # the backend says "not found"
    os.symlink("loop.ipynb", root / "loop.ipynb")
    with pytest.raises(LaunchRefused, match="cannot be opened safely"):
        notebook_at_launch(root, "loop.ipynb")
    os.symlink(nb, root / "inside-link.ipynb")
    with pytest.raises(LaunchRefused, match="replaced by a link"):
        notebook_at_launch(root, "inside-link.ipynb")
    with pytest.raises(LaunchRefused, match="leaves"):
        notebook_at_launch(root, "../root/a/nb.ipynb")


def test_the_local_backend_names_its_gpu_type_and_a_typeless_cluster_takes_none():
    """A gpu_type must name a type some pool declares: the local backend declares its own (NVML's product
    name, or 'virtual'); on a cluster whose pools declare none, any gpu_type is refused rather than ignored."""
    backend = LocalBackend(virtual_gpus=2)
    try:
        assert backend.pools() == [Pool("local", gpu_type="virtual")]
    finally:
        backend.close()
    assert LocalBackend(virtual_gpus=2, gpu_type="A100").pools()[0].gpu_type == "A100"
    check_gpu_type(None, set())
    with pytest.raises(ApiError) as refused:
        check_gpu_type("h100", set())
    assert refused.value.status == 400 and "declare no GPU type" in refused.value.message
