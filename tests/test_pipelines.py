"""Pipelines (issue 14): jobs that wait for others, DAGs over REST on a real server with real notebooks,
GPUSCHED_INPUTS, and WAITING jobs across a restart."""

from __future__ import annotations

import asyncio

import pytest

from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import make_service, run_until
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(240)
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@pytest.fixture
def gpusched_config():
    # The test user is no admin, so only their own jobs are theirs to depend on.
    return {"tenants": {"default": {"quota": 2}}, "admin_users": ["someone-else"]}


def _notebooks(root):
    make_notebook(
        root / "prep.ipynb",
        "import os, pathlib\npathlib.Path(os.environ['GPUSCHED_JOB_DIR'], 'data.txt').write_text('prepared 42')",
    )
    make_notebook(
        root / "train.ipynb",
        "import json, os, pathlib\ninputs = json.loads(os.environ['GPUSCHED_INPUTS'])\n"
        "assert [i['name'] for i in inputs] == ['prep'], inputs\n"
        "assert pathlib.Path(inputs[0]['notebook']).is_file()\n"
        "print('read:', pathlib.Path(inputs[0]['output_dir'], 'data.txt').read_text())",
    )
    make_notebook(root / "broken.ipynb", "1/0")
    make_notebook(root / "report.ipynb", "print('never runs')")


async def test_a_four_step_dag_runs_in_order_and_a_failed_branch_cancels_its_dependants(api, jp_root_dir):
    _notebooks(jp_root_dir)
    steps = [{"notebook": n} for n in ("prep.ipynb", "train.ipynb", "broken.ipynb", "report.ipynb")]
    code, pipe = await api("POST", "pipelines", {"steps": steps, "edges": [[0, 1], [0, 2], [2, 3]]})
    assert code == 201, pipe
    ids = [s["id"] for s in pipe["steps"]]
    assert [s["state"] for s in pipe["steps"]] == ["QUEUED", "WAITING", "WAITING", "WAITING"]
    assert pipe["steps"][3]["after"] == [ids[2]] and pipe["steps"][1]["pipeline_id"] == pipe["id"]
    assert pipe["edges"] == [[0, 1], [0, 2], [2, 3]]
    for jid in ids:
        await wait_for_state(api, jid, TERMINAL, timeout=150)
    code, pipe = await api("GET", f"pipelines/{pipe['id']}")
    assert code == 200
    states = [s["state"] for s in pipe["steps"]]
    assert states == ["SUCCEEDED", "SUCCEEDED", "FAILED", "CANCELLED"], pipe
    assert pipe["state"] == "FAILED"
    assert ids[2] in pipe["steps"][3]["reason"] and "failed" in pipe["steps"][3]["reason"]
    # In order: a step entered the queue only after its parent had ended.
    events = {}
    for jid in ids[:3]:
        code, body = await api("GET", f"jobs/{jid}/events")
        events[jid] = body["events"]
    prep_end = events[ids[0]][-1]["time"]
    for child in ids[1:3]:
        assert [e["to"] for e in events[child]][:2] == ["WAITING", "QUEUED"]
        assert events[child][1]["time"] >= prep_end
    # The step read its parent's output through GPUSCHED_INPUTS.
    code, log = await api("GET", f"jobs/{ids[1]}/output")
    assert "read: prepared 42" in str(log)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"steps": [{"notebook": "a.ipynb"}, {"notebook": "a.ipynb"}], "edges": [[0, 1], [1, 0]]}, "edges"),
        ({"steps": [{"notebook": "a.ipynb"}], "edges": [[0, 3]]}, "edges"),
        ({"steps": [{"notebook": "a.ipynb"}, {"notebook": "missing.ipynb"}], "edges": [[0, 1]]}, "steps[1].notebook"),
        ({"steps": [{"notebook": "a.ipynb", "gpus": 99}]}, "steps[0].gpus"),
        ({"steps": []}, "steps"),
        ({"steps": [{"notebook": "a.ipynb", "after": ["x"]}]}, "steps[0].after"),
    ],
)
async def test_a_bad_pipeline_is_a_400_and_submits_nothing(api, jp_root_dir, body, field):
    make_notebook(jp_root_dir / "a.ipynb", "pass")
    code, err = await api("POST", "pipelines", body)
    assert code == 400 and err["field"] == field, err
    code, listing = await api("GET", "jobs")
    assert listing["jobs"] == []


async def test_after_an_unknown_or_someone_elses_job_is_a_400(api, jp_root_dir, service):
    make_notebook(jp_root_dir / "a.ipynb", "pass")
    code, err = await api("POST", "jobs", {"notebook": "a.ipynb", "after": ["nosuchjob123"]})
    assert code == 400 and err["field"] == "after" and "nosuchjob123" in err["message"]
    theirs = service.submit(notebook="a.ipynb", owner="someone-else", tenant="default")
    code, err = await api("POST", "jobs", {"notebook": "a.ipynb", "after": [theirs.id]})
    assert code == 400 and err["field"] == "after", err
    pipeline_id, _ = service.submit_pipeline([{"notebook": "a.ipynb", "tenant": "default"}], [], "someone-else")
    code, err = await api("GET", f"pipelines/{pipeline_id}")
    assert code == 404, err
    code, err = await api("POST", "jobs", {"notebook": "a.ipynb", "after": ["x"], "when": "maybe"})
    assert code == 400 and err["field"] == "when"


async def test_a_dependency_that_already_ended_counts_at_once(api, jp_root_dir):
    make_notebook(jp_root_dir / "a.ipynb", "pass")
    make_notebook(jp_root_dir / "bad.ipynb", "1/0")
    code, ok = await api("POST", "jobs", {"notebook": "a.ipynb"})
    code, bad = await api("POST", "jobs", {"notebook": "bad.ipynb"})
    for jid in (ok["id"], bad["id"]):
        await wait_for_state(api, jid, TERMINAL)
    code, job = await api("POST", "jobs", {"notebook": "a.ipynb", "after": [ok["id"]]})
    assert code == 201 and job["state"] in ("QUEUED", "ADMITTED", "RUNNING"), job
    code, job = await api("POST", "jobs", {"notebook": "a.ipynb", "after": [bad["id"]]})
    assert code == 201 and job["state"] == "CANCELLED" and bad["id"] in job["reason"], job
    code, job = await api("POST", "jobs", {"notebook": "a.ipynb", "after": [bad["id"]], "when": "ended"})
    assert code == 201 and job["state"] != "CANCELLED" and job["when"] == "ended", job
    await asyncio.sleep(0)


def test_waiting_jobs_survive_a_restart_and_are_released_after_it(tmp_path):
    svc = make_service(tmp_path)
    make_notebook(svc.config.root_dir / "slow.ipynb", "import time; time.sleep(3)")
    make_notebook(svc.config.root_dir / "next.ipynb", "pass")
    first = svc.submit(notebook="slow.ipynb", owner="me")
    second = svc.submit(notebook="next.ipynb", owner="me", after=[first.id])
    assert second.state.value == "WAITING"
    svc.store.close()

    again = make_service(tmp_path, LocalBackend(virtual_gpus=2, heartbeat_interval=0.5))
    try:
        restored = again.scheduler.jobs[second.id]
        assert restored.state.value == "WAITING" and restored.spec.after == (first.id,)
        assert again.scheduler.position(second.id) is None  # still outside the queue
        run_until(again, lambda: again.scheduler.jobs[second.id].state.terminal, timeout=120, what="both ran")
        assert again.scheduler.jobs[first.id].state.value == "SUCCEEDED"
        assert again.scheduler.jobs[second.id].state.value == "SUCCEEDED"
    finally:
        run_until(again, lambda: not again.scheduler.active, timeout=30)
        again.store.close()


async def test_a_pipeline_someone_cancelled_is_cancelled_not_failed(api, jp_root_dir):
    make_notebook(jp_root_dir / "slow.ipynb", "import time; time.sleep(60)")
    make_notebook(jp_root_dir / "next.ipynb", "pass")
    steps = [{"notebook": "slow.ipynb"}, {"notebook": "next.ipynb"}]
    code, pipe = await api("POST", "pipelines", {"steps": steps, "edges": [[0, 1]]})
    assert code == 201, pipe
    ids = [s["id"] for s in pipe["steps"]]
    for jid in ids:
        await api("DELETE", f"jobs/{jid}")
    for jid in ids:
        await wait_for_state(api, jid, TERMINAL)
    code, pipe = await api("GET", f"pipelines/{pipe['id']}")
    assert [s["state"] for s in pipe["steps"]] == ["CANCELLED", "CANCELLED"], pipe
    assert pipe["state"] == "CANCELLED"
