"""Hub mode against a real JupyterHub (issue 11): the hostile-input probes and the notebook
swap of tests/test_hostile_input.py, as a Hub user whose notebooks live in their own folder."""

from __future__ import annotations

import os

import pytest

from jupyter_gpusched.testing import Unavailable
from jupyter_gpusched.testing.hub import Hub, ServiceClient
from jupyter_gpusched.testing.notebooks import notebook_json
from jupyter_gpusched.testing.postgres import PostgresServer
from jupyter_gpusched.testing.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    pg = None
    try:  # PostgreSQL where the server binaries exist (CI): it refuses NUL bytes and over-long names
        pg = PostgresServer().start()
    except Unavailable:
        pass
    gpusched = {"local_gpus": 1, "tick_interval": 0.2, "tenants": {"vision": {"quota": 1, "burst": 0}}}
    gpusched["default_tenant"] = "vision"
    if pg is not None:
        gpusched["db_url"] = pg.create_database()
    h = Hub(tmp_path_factory.mktemp("hub"), groups={"vision": ["alice"]}, gpusched=gpusched)
    try:
        h.start()
    except Unavailable as exc:
        pytest.skip(str(exc))
    for user in ("alice", "bob"):
        h.create_users([user])
    (h.home("alice") / "work").mkdir(parents=True, exist_ok=True)
    (h.home("alice") / "work" / "nb.ipynb").write_text(notebook_json("print('mine')"))
    (h.home("alice") / "ok.ipynb").write_text(notebook_json("x = 1"))
    (h.home("alice") / "sleep.ipynb").write_text(notebook_json("import time; time.sleep(120)"))
    os.symlink("loop.ipynb", h.home("alice") / "loop.ipynb")
    (h.home("bob") / "work").mkdir(parents=True, exist_ok=True)
    (h.home("bob") / "work" / "nb.ipynb").write_text(notebook_json("print('bob only')"))
    yield h
    h.stop()
    if pg is not None:
        pg.stop()


@pytest.fixture(scope="module")
def alice(hub):
    return ServiceClient(hub.service_url, hub.token("alice"))


PROBES = [
    ("100,000 [", b"[" * 100_000, 400),
    ("NUL in notebook", b'{"notebook": "ok\\u0000.ipynb"}', 400),
    ("lone surrogate", b'{"notebook": "\\ud800.ipynb"}', 400),
    ("name over 255 bytes", b'{"notebook": "' + b"a" * 300 + b'.ipynb"}', 400),
    ("symlink loop", b'{"notebook": "loop.ipynb"}', 400),
    ("max_runtime 1e400", b'{"notebook": "ok.ipynb", "max_runtime": 1' + b"0" * 400 + b"}", 400),
    ("NaN parameter", b'{"notebook": "ok.ipynb", "parameters": {"x": NaN}}', 400),
    ("parameters over 64 KiB", b'{"notebook": "ok.ipynb", "parameters": {"x": "' + b"a" * 70_000 + b'"}}', 413),
    ("NUL in tenant", b'{"notebook": "ok.ipynb", "tenant": "a\\u0000b"}', 400),
    ("tenant over 255", b'{"notebook": "ok.ipynb", "tenant": "' + b"t" * 300 + b'"}', 400),
]


@pytest.mark.parametrize("case,raw,status", PROBES, ids=[p[0] for p in PROBES])
def test_hostile_submits_are_4xx_in_hub_mode(alice, case, raw, status):
    r = alice.call("POST", "api/jobs", data=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error", "message", "field"}, r.text
    code, listing = alice.json("GET", "api/jobs")
    assert code == 200 and listing["jobs"] == []


def test_unknown_paths_authenticate_first(hub, alice):
    assert ServiceClient(hub.service_url, None).call("GET", "api/no/such").status_code == 403
    assert alice.call("GET", "api/no/such").status_code == 404


def test_a_folder_swapped_for_a_link_after_submit_is_not_run(hub, alice):
    code, holder = alice.json("POST", "api/jobs", json={"notebook": "sleep.ipynb"})  # the only GPU
    assert code == 201, holder
    wait_for(lambda: alice.json("GET", f"api/jobs/{holder['id']}")[1]["state"] == "RUNNING", 60, "the holder to run")
    code, queued = alice.json("POST", "api/jobs", json={"notebook": "work/nb.ipynb"})
    assert code == 201 and queued["state"] == "QUEUED", queued
    home = hub.home("alice")
    os.rename(home / "work", home / "work-old")
    os.symlink(hub.home("bob") / "work", home / "work")  # the same path now leads into bob's folder
    alice.json("DELETE", f"api/jobs/{holder['id']}")

    def ended():
        job = alice.json("GET", f"api/jobs/{queued['id']}")[1]
        return job if job["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") else None

    done = wait_for(ended, 90, "the swapped job to end")
    assert done["state"] == "FAILED" and "link" in done["message"], done
    assert "bob only" not in alice.call("GET", f"api/jobs/{queued['id']}/log").text
