"""Learned runtime estimates in the live service, on a real Jupyter server running real notebooks:
after two succeeded runs of a notebook a third, queued run has an estimate learned from them, which
the API, the estimated start, the store and `jupyter gpusched status` show."""

from __future__ import annotations

import asyncio
import io
import threading
from datetime import datetime

import pytest

from jupyter_gpusched import cli
from jupyter_gpusched.cli.commands import expected_run
from jupyter_gpusched.core.estimates import quantile
from jupyter_gpusched.core.lookahead import Lookahead
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def gpusched_config():
    return {"tenants": {"default": {"quota": 2}}}


async def wait_for_estimate(api, job_id: str, source: str, tries: int = 200) -> dict:
    for _ in range(tries):
        code, job = await api("GET", f"jobs/{job_id}")
        assert code == 200, job
        if job["runtime_estimate"]["source"] == source:
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never got a {source} estimate: {job['runtime_estimate']}")


async def test_a_third_run_of_a_notebook_gets_an_estimate_learned_from_the_first_two(
    api, service, jp_root_dir, jp_serverapp
):
    make_notebook(jp_root_dir / "work" / "train.ipynb", "import time\ntime.sleep(0.5)")
    make_notebook(jp_root_dir / "hold.ipynb", "import time\ntime.sleep(60)")
    runs = []
    for _ in range(2):
        code, job = await api("POST", "jobs", {"notebook": "work/train.ipynb", "gpus": 1})
        assert code == 201, job
        assert job["runtime_estimate"] == {"seconds": None, "source": None, "basis": None, "samples": None}
        done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
        assert done["state"] == "SUCCEEDED", done
        runs.append(service.scheduler.jobs[job["id"]].attained_gpu_s)  # 1 GPU: its run time
    # both GPUs held by a notebook of another name: the third run waits
    code, blocker = await api("POST", "jobs", {"notebook": "hold.ipynb", "gpus": 2})
    assert code == 201
    await wait_for_state(api, blocker["id"], {"RUNNING"})
    code, third = await api("POST", "jobs", {"notebook": "work/train.ipynb", "gpus": 1})
    assert code == 201 and third["state"] == "QUEUED"
    third = await wait_for_estimate(api, third["id"], "learned")
    est = third["runtime_estimate"]
    assert est["basis"] == "owner+notebook+gpus" and est["samples"] == 2
    assert est["seconds"] == pytest.approx(quantile(runs, 0.8))
    assert third["state"] == "QUEUED"
    # the blocker (another notebook, 2 GPUs) has a tenant-wide estimate from the same two runs: the
    # third run's estimated start is known now (it was unknown while running jobs had no runtime limit)
    code, held = await api("GET", f"jobs/{blocker['id']}")
    assert held["runtime_estimate"]["source"] == "learned" and held["runtime_estimate"]["basis"] == "tenant"
    assert third["estimated_start"] is not None
    # a max_runtime below what was learned caps it
    code, capped = await api("POST", "jobs", {"notebook": "work/train.ipynb", "gpus": 1, "max_runtime": 0.01})
    assert code == 201
    code, capped = await api("GET", f"jobs/{capped['id']}")
    assert capped["runtime_estimate"]["source"] == "max_runtime" and capped["runtime_estimate"]["seconds"] == 0.01
    # the history is in the store: a restart learns nothing again
    stored = dict(service.store.runtimes.load(100))
    assert sorted(len(r) for r in stored.values()) == [2, 2, 2, 2]
    # and the command line says it
    url = jp_serverapp.connection_url
    token = jp_serverapp.identity_provider.token
    out = io.StringIO()
    args = cli.build_parser().parse_args(["--url", url, "--token", token, "status", third["id"]])
    assert await asyncio.to_thread(cli.run, args, out) == 0
    assert "expected run: ~1 min (learned from 2 runs of this notebook)" in out.getvalue(), out.getvalue()
    for job_id in (blocker["id"], third["id"], capped["id"]):
        code, _ = await api("DELETE", f"jobs/{job_id}")
        assert code == 200


async def test_the_server_answers_while_an_estimated_start_is_worked_out(api, jp_root_dir, monkeypatch):
    """The forward run behind `estimated_start` can take seconds on a loaded cluster: it runs in the
    estimates thread, and the event loop serves other requests meanwhile. Here the run is held at a gate
    until another request has been answered; on the loop it would hold that request up, and fail."""
    entered, gate, threads = threading.Event(), threading.Event(), []
    real_start_of = Lookahead.start_of

    def gated_start_of(self, job_id):
        threads.append(threading.current_thread())
        entered.set()
        gate.wait(20)
        return real_start_of(self, job_id)

    monkeypatch.setattr(Lookahead, "start_of", gated_start_of)
    gate.set()  # open until the request below
    make_notebook(jp_root_dir / "hold.ipynb", "import time\ntime.sleep(60)")
    code, blocker = await api("POST", "jobs", {"notebook": "hold.ipynb", "gpus": 2, "max_runtime": 3600})
    assert code == 201
    await wait_for_state(api, blocker["id"], {"RUNNING"})
    code, queued = await api("POST", "jobs", {"notebook": "hold.ipynb", "gpus": 1, "max_runtime": 60})
    assert code == 201 and queued["state"] == "QUEUED"
    gate.clear()
    entered.clear()
    try:
        asked = asyncio.ensure_future(api("GET", f"jobs/{queued['id']}"))
        for _ in range(200):
            if entered.is_set():
                break
            await asyncio.sleep(0.05)
        assert entered.is_set() and not asked.done()
        code, queues = await asyncio.wait_for(api("GET", "queues"), 10)  # answered while the run is held
        assert code == 200 and queues["queues"]["default"]["queued"] == 1
        assert not asked.done()
    finally:
        gate.set()
    code, job = await asked
    assert code == 200 and job["state"] == "QUEUED"
    # the blocker ends at its limit, an hour after it started: so does the wait
    started = datetime.fromisoformat(blocker["created"]).timestamp()
    assert datetime.fromisoformat(job["estimated_start"]).timestamp() == pytest.approx(started + 3600, abs=30)
    assert threads and all(t is not threading.main_thread() for t in threads)
    for job_id in (blocker["id"], queued["id"]):
        await api("DELETE", f"jobs/{job_id}")


def test_expected_run_words():
    learned = {"seconds": 720.0, "source": "learned", "basis": "owner+notebook+gpus", "samples": 5}
    assert expected_run(learned) == "~12 min (learned from 5 runs of this notebook)"
    assert (
        expected_run(dict(learned, basis="tenant", samples=3)) == "~12 min (learned from 3 runs of this tenant's jobs)"
    )
    assert expected_run({"seconds": 7200.0, "source": "max_runtime", "basis": None, "samples": None}) == (
        "at most ~2.0 h (its max_runtime)"
    )
    assert expected_run({"seconds": None, "source": None, "basis": None, "samples": None}) == ""
    assert expected_run(None) == ""
