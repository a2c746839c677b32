"""The REST API on a real Jupyter server, running real notebooks on the local backend."""

from __future__ import annotations

import asyncio
import json
import os

import nbformat
import pytest

from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def gpusched_config():
    return {"tenants": {"default": {"quota": 2}, "team-a": {"quota": 1, "burst": 0}}}


async def test_submit_runs_to_success_with_output_and_log(api, jp_root_dir):
    make_notebook(
        jp_root_dir / "work" / "train.ipynb",
        "import os, time\ntime.sleep(1.5)\nprint('lr is', lr, 'gpus', os.environ['CUDA_VISIBLE_DEVICES'])",
        parameters="lr = 0.5",
    )
    code, job = await api("POST", "jobs", {"notebook": "work/train.ipynb", "gpus": 1, "parameters": {"lr": 0.01}})
    assert code == 201, job
    # (the answer is the job as it is when it is sent: the scheduler may have admitted it already)
    assert job["state"] in {"QUEUED", "ADMITTED", "RUNNING"} and job["notebook"] == "work/train.ipynb"
    assert job["gpus"] == 1
    for key in ("id", "state", "notebook", "gpus", "priority", "tenant", "created"):
        assert key in job
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "SUCCEEDED", done
    assert "RUNNING" in done["_seen"]

    code, events = await api("GET", f"jobs/{job['id']}/events")
    assert [e["to"] for e in events["events"]] == ["QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"]

    code, out = await api("GET", f"jobs/{job['id']}/output")
    assert code == 200
    nb = nbformat.reads(json.dumps(out), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "lr is 0.01" in text  # the injected parameter won over the default
    assert "gpus 0" in text or "gpus 1" in text

    code, log = await api("GET", f"jobs/{job['id']}/log")
    assert code == 200 and isinstance(log, str) and log.strip()


async def test_failing_notebook_reports_the_error(api, jp_root_dir):
    make_notebook(jp_root_dir / "bad.ipynb", "1/0")
    code, job = await api("POST", "jobs", {"notebook": "bad.ipynb"})
    assert code == 201
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "FAILED"
    assert "ZeroDivisionError" in done["message"]
    code, out = await api("GET", f"jobs/{job['id']}/output")
    assert code == 200  # the executed copy shows where it failed


async def test_priorities_order_admission_when_gpus_are_scarce(api, jp_root_dir):
    make_notebook(jp_root_dir / "hold.ipynb", "import time; time.sleep(4)")
    make_notebook(jp_root_dir / "quick.ipynb", "x = 1")
    code, blocker = await api("POST", "jobs", {"notebook": "hold.ipynb", "gpus": 2})
    assert code == 201
    await wait_for_state(api, blocker["id"], {"RUNNING"})
    ids = {}
    for prio in ("low", "normal", "high"):
        code, job = await api("POST", "jobs", {"notebook": "quick.ipynb", "gpus": 2, "priority": prio})
        assert code == 201, job
        ids[prio] = job["id"]
    code, high = await api("GET", f"jobs/{ids['high']}")
    assert high["position"] == 0 and high["estimated_start"] is None  # the blocker has no runtime limit
    code, low = await api("GET", f"jobs/{ids['low']}")
    assert low["position"] == 2
    finished = {p: await wait_for_state(api, i, {"SUCCEEDED"}) for p, i in ids.items()}
    started = {p: finished[p]["started"] for p in finished}
    assert started["high"] < started["normal"] < started["low"], started


async def test_cancel_queued_and_running_jobs(api, jp_root_dir):
    make_notebook(jp_root_dir / "sleep.ipynb", "import time; time.sleep(60)")
    code, running = await api("POST", "jobs", {"notebook": "sleep.ipynb", "gpus": 2})
    code, queued = await api("POST", "jobs", {"notebook": "sleep.ipynb", "gpus": 2})
    await wait_for_state(api, running["id"], {"RUNNING"})
    code, job = await api("DELETE", f"jobs/{queued['id']}")
    assert code == 200 and job["state"] == "CANCELLED"
    code, job = await api("DELETE", f"jobs/{running['id']}")
    assert code == 200 and job["state"] == "CANCELLED"
    code, cluster = await api("GET", "cluster")
    assert cluster["free_gpus"] == 2
    code, err = await api("DELETE", f"jobs/{running['id']}")
    assert code == 409 and err["error"] == "conflict"


BAD_SUBMITS = [
    # (case, body or raw bytes, status, error, field)
    ("not json", b"{nope", 400, "bad_json", None),
    ("not an object", b"[1, 2]", 400, "bad_json", None),
    ("missing notebook", {}, 400, "missing_field", "notebook"),
    ("unknown field", {"notebook": "ok.ipynb", "gpu": 1}, 400, "unknown_field", "gpu"),
    ("notebook not a string", {"notebook": 5}, 400, "wrong_type", "notebook"),
    ("gpus as string", {"notebook": "ok.ipynb", "gpus": "2"}, 400, "wrong_type", "gpus"),
    ("gpus as bool", {"notebook": "ok.ipynb", "gpus": True}, 400, "wrong_type", "gpus"),
    ("gpus fractional", {"notebook": "ok.ipynb", "gpus": 1.5}, 400, "wrong_type", "gpus"),
    ("gpus zero", {"notebook": "ok.ipynb", "gpus": 0}, 400, "invalid_value", "gpus"),
    ("gpus more than exist", {"notebook": "ok.ipynb", "gpus": 64}, 400, "invalid_value", "gpus"),
    ("gpus over tenant limit", {"notebook": "ok.ipynb", "gpus": 2, "tenant": "team-a"}, 400, "invalid_value", "gpus"),
    ("unknown priority", {"notebook": "ok.ipynb", "priority": "urgent"}, 400, "invalid_value", "priority"),
    ("priority not a string", {"notebook": "ok.ipynb", "priority": 2}, 400, "wrong_type", "priority"),
    ("unknown tenant", {"notebook": "ok.ipynb", "tenant": "nobody"}, 400, "invalid_value", "tenant"),
    ("path escapes root", {"notebook": "../outside.ipynb"}, 400, "invalid_value", "notebook"),
    ("absolute path", {"notebook": "/etc/passwd"}, 400, "invalid_value", "notebook"),
    ("symlink escape", {"notebook": "link.ipynb"}, 400, "invalid_value", "notebook"),
    ("missing notebook file", {"notebook": "nope.ipynb"}, 400, "not_found", "notebook"),
    ("not a notebook", {"notebook": "data.txt"}, 400, "invalid_value", "notebook"),
    ("corrupt notebook", {"notebook": "corrupt.ipynb"}, 400, "invalid_value", "notebook"),
    ("parameters not an object", {"notebook": "ok.ipynb", "parameters": [1]}, 400, "wrong_type", "parameters"),
    (
        "parameter name not identifier",
        {"notebook": "ok.ipynb", "parameters": {"1x": 1}},
        400,
        "invalid_value",
        "parameters.1x",
    ),
    ("negative max_runtime", {"notebook": "ok.ipynb", "max_runtime": -5}, 400, "invalid_value", "max_runtime"),
    ("max_runtime as text", {"notebook": "ok.ipynb", "max_runtime": "1h"}, 400, "wrong_type", "max_runtime"),
    ("preemptible as text", {"notebook": "ok.ipynb", "preemptible": "yes"}, 400, "wrong_type", "preemptible"),
    ("too many retries", {"notebook": "ok.ipynb", "max_retries": 99}, 400, "invalid_value", "max_retries"),
    ("cpus as text", {"notebook": "ok.ipynb", "cpus": "2"}, 400, "wrong_type", "cpus"),
    ("negative cpus", {"notebook": "ok.ipynb", "cpus": -1}, 400, "invalid_value", "cpus"),
    ("cpus more than the machine has", {"notebook": "ok.ipynb", "cpus": 4096}, 400, "invalid_value", "cpus"),
    ("memory fractional", {"notebook": "ok.ipynb", "memory": 1.5}, 400, "wrong_type", "memory"),
    ("memory more than the machine has", {"notebook": "ok.ipynb", "memory": 2**26}, 400, "invalid_value", "memory"),
]


@pytest.fixture
def bad_input_files(jp_root_dir, tmp_path):
    make_notebook(jp_root_dir / "ok.ipynb", "x = 1")
    outside = make_notebook(tmp_path / "outside" / "secret.ipynb", "x = 1")
    os.symlink(outside, jp_root_dir / "link.ipynb")
    (jp_root_dir / "data.txt").write_text("hello")
    (jp_root_dir / "corrupt.ipynb").write_text("{")


@pytest.mark.parametrize("case,body,status,error,field", BAD_SUBMITS, ids=[c[0] for c in BAD_SUBMITS])
async def test_bad_submit_is_a_clear_4xx_and_changes_nothing(api, bad_input_files, case, body, status, error, field):
    if isinstance(body, bytes):
        code, resp = await api("POST", "jobs", raw=body)
    else:
        code, resp = await api("POST", "jobs", body)
    assert code == status, resp
    assert set(resp) == {"error", "message", "field"}, resp
    assert resp["error"] == error and resp["field"] == field, resp
    assert resp["message"] and "Traceback" not in resp["message"]
    code, listing = await api("GET", "jobs")
    assert listing["jobs"] == []


@pytest.mark.parametrize(
    "method,path,params,status,error",
    [
        ("GET", "jobs/doesnotexist", {}, 404, "not_found"),
        ("DELETE", "jobs/doesnotexist", {}, 404, "not_found"),
        ("GET", "jobs/doesnotexist/log", {}, 404, "not_found"),
        ("GET", "jobs/doesnotexist/output", {}, 404, "not_found"),
        ("GET", "jobs", {"state": "BOGUS"}, 400, "invalid_value"),
        ("GET", "no/such/endpoint", {}, 404, "not_found"),
    ],
)
async def test_bad_requests_get_json_errors(api, method, path, params, status, error):
    code, resp = await api(method, path, **params)
    assert code == status and resp["error"] == error, resp


async def test_log_offset_follows_a_running_job(api, jp_root_dir):
    make_notebook(
        jp_root_dir / "talk.ipynb",
        "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.5)",
    )
    code, job = await api("POST", "jobs", {"notebook": "talk.ipynb"})
    await wait_for_state(api, job["id"], {"SUCCEEDED"})
    code, full = await api("GET", f"jobs/{job['id']}/log")
    code, tail = await api("GET", f"jobs/{job['id']}/log", offset=str(len(full.encode()) - 5))
    assert full.endswith(tail) and len(tail) == 5
    code, err = await api("GET", f"jobs/{job['id']}/log", offset="-1")
    assert code == 400 and err["field"] == "offset"


async def test_queues_cluster_and_metrics(api, jp_fetch, jp_root_dir):
    make_notebook(jp_root_dir / "sleep.ipynb", "import time; time.sleep(30)")
    code, job = await api("POST", "jobs", {"notebook": "sleep.ipynb", "gpus": 1})
    await wait_for_state(api, job["id"], {"RUNNING"})
    code, q = await api("GET", "queues")
    assert q["queues"]["default"]["used"] == 1 and q["queues"]["team-a"]["quota"] == 1
    code, c = await api("GET", "cluster")
    assert c["total_gpus"] == 2 and c["allocated_gpus"] == 1 and c["utilization"] == 0.5
    r = await jp_fetch("gpusched", "metrics")
    text = r.body.decode()
    assert "gpusched_gpus_allocated 1" in text
    assert 'gpusched_jobs{priority="normal",state="RUNNING",tenant="default"} 1' in text
    await api("DELETE", f"jobs/{job['id']}")
    await asyncio.sleep(0.2)


async def test_requests_without_token_are_rejected(jp_fetch, jp_http_port, jp_base_url):
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    client = AsyncHTTPClient()
    for path in ("gpusched/api/jobs", "gpusched/api/cluster", "gpusched/metrics"):
        with pytest.raises(HTTPClientError) as exc:
            await client.fetch(f"http://localhost:{jp_http_port}{jp_base_url}{path}")
        assert exc.value.code in (401, 403)
    with pytest.raises(HTTPClientError) as exc:  # a browser-style POST without the XSRF token
        await client.fetch(f"http://localhost:{jp_http_port}{jp_base_url}gpusched/api/jobs", method="POST", body="{}")
    assert exc.value.code in (401, 403)


async def test_list_is_paginated_newest_first(api, jp_root_dir):
    make_notebook(jp_root_dir / "sleep.ipynb", "import time; time.sleep(30)")
    ids = []
    for _ in range(3):
        code, job = await api("POST", "jobs", {"notebook": "sleep.ipynb", "gpus": 2})
        ids.append(job["id"])
    code, first = await api("GET", "jobs", limit="2")
    assert [j["id"] for j in first["jobs"]] == ids[::-1][:2] and first["total"] == 3 and first["next_offset"] == 2
    code, rest = await api("GET", "jobs", limit="2", offset="2")
    assert [j["id"] for j in rest["jobs"]] == [ids[0]] and rest["next_offset"] is None
    code, err = await api("GET", "jobs", limit="0")
    assert code == 400 and err["field"] == "limit"
    code, err = await api("GET", "jobs", offset="x")
    assert code == 400 and err["error"] == "wrong_type"
    for i in ids:
        await api("DELETE", f"jobs/{i}")
