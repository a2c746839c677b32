"""Budgets in the live service (real store, real local backend) and the showback report over REST."""

from __future__ import annotations

import asyncio
import csv
import getpass
import io

import pytest

from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.cli import build_parser, run
from jupyter_gpusched.core import JobState, Tenant
from jupyter_gpusched.core.budget import Budget
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import run_until, service_in
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(180)

TINY = 0.0005  # GPU-hours = 1.8 GPU-seconds: one job of a few seconds spends it


def budget_service(tmp_path, enforce: str, limit: float = TINY, quota: int = 2):
    return service_in(
        tmp_path,
        LocalBackend(virtual_gpus=2, heartbeat_interval=0.5),
        tenants=(Tenant("vision", quota), Tenant("nlp", 0)),
        budgets={"vision": Budget(limit, enforce=enforce)},
        memory_check_interval=0.0,
    )


def spend(service, tmp_path):
    make_notebook(tmp_path / "root" / "nb.ipynb", "import time; time.sleep(3)")
    first = service.submit(notebook="nb.ipynb", owner="alice", tenant="vision")
    run_until(service, lambda: first.state.terminal)
    assert first.state is JobState.SUCCEEDED
    return first


def test_hard_budget_holds_new_jobs_until_raised_and_survives_a_restart(tmp_path):
    service = budget_service(tmp_path, "hard")
    spend(service, tmp_path)
    held = service.submit(notebook="nb.ipynb", owner="alice", tenant="vision")
    for _ in range(10):
        service.tick()
    assert held.state is JobState.QUEUED
    assert held.reason.startswith("tenant vision is over its gpu_hours budget for ")
    assert "; waits until " in held.reason and "UTC or an admin raises it" in held.reason
    bar = service.queues()["vision"]["budget"]
    assert bar["state"] == "over" and bar["unit"] == "gpu_hours" and bar["used"] >= 3 / 3600
    assert service.queues()["nlp"]["budget"] is None
    levels = [w["level"] for w in service.store.budget_warnings("vision")]
    assert levels == [80, 100]  # once each, however many passes
    service.backend.close()
    service.store.close()
    # restart: spending is rebuilt from the store, the job is still held, no warning twice
    service = budget_service(tmp_path, "hard")
    held = service.get(held.id)
    for _ in range(5):
        service.tick()
    assert held.state is JobState.QUEUED
    assert [w["level"] for w in service.store.budget_warnings("vision")] == [80, 100]
    service.backend.close()
    service.store.close()
    # the admin raises the budget: it runs
    service = budget_service(tmp_path, "hard", limit=1.0)
    held = service.get(held.id)
    run_until(service, lambda: held.state.terminal)
    assert held.state is JobState.SUCCEEDED
    service.backend.close()


def test_soft_budget_may_not_borrow_idle_gpus(tmp_path):
    service = budget_service(tmp_path, "soft", quota=1)
    spend(service, tmp_path)
    a = service.submit(notebook="nb.ipynb", owner="alice", tenant="vision")
    b = service.submit(notebook="nb.ipynb", owner="alice", tenant="vision")
    run_until(service, lambda: a.state is JobState.RUNNING)
    for _ in range(5):
        service.tick()
    assert b.state is JobState.QUEUED and service.scheduler.cluster.free_gpus == 1  # idle, not lent
    assert b.budget_demoted
    run_until(service, lambda: b.state.terminal)  # within its quota once `a` is done
    service.backend.close()


@pytest.fixture
def gpusched_config():
    return {
        "tenants": {"vision": {"quota": 2, "budget": {"gpu_hours": 100, "period": "month"}}, "nlp": {"quota": 0}},
        "pools": {"local": {"price_per_gpu_hour": 2.5}},
        "user_tenants": {"bob": "nlp", getpass.getuser(): "vision"},
        "admin_users": ["root-admin"],  # the caller (this process's user) is not an admin
    }


async def test_report_json_and_csv_users_see_their_own(api, service, jp_root_dir, jp_serverapp):
    make_notebook(jp_root_dir / "nb.ipynb", "import time; time.sleep(1)")
    me = getpass.getuser()
    mine = service.submit(notebook="nb.ipynb", owner=me, tenant="vision")
    theirs = service.submit(notebook="nb.ipynb", owner="bob")
    await wait_for_state(api, mine.id, {"SUCCEEDED"})
    while not theirs.state.terminal:  # not mine: the API does not show it to me
        await asyncio.sleep(0.1)
    code, report = await api("GET", "usage/report", by="user")
    assert code == 200
    assert [r["user"] for r in report["rows"]] == [me]  # bob's job is not shown to me
    row = report["rows"][0]
    assert row["tenant"] == "vision" and row["jobs"] == 1 and row["gpu_hours"] > 0
    assert row["cost"] == pytest.approx(row["gpu_hours"] * 2.5, abs=1e-3)
    # the service (as an admin would) holds both, and the tenants' sum is what the rows hold
    admin = service.budgets.report("month", "tenant", service.clock())
    assert {r["tenant"] for r in admin["rows"]} == {"vision", "nlp"}
    code, text = await api("GET", "usage/report", by="user", format="csv")
    assert code == 200
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == ["period", "user", "tenant", "jobs", "gpu_hours", "cost", "spot_gpu_hours", "spot_savings"]
    assert [(r["user"], r["tenant"], r["period"]) for r in rows] == [(me, "vision", report["period"])]
    assert float(rows[0]["gpu_hours"]) == row["gpu_hours"]
    for bad in ({"by": "team"}, {"period": "year"}, {"format": "xml"}):
        code, err = await api("GET", "usage/report", **bad)
        assert code == 400 and err["field"] == next(iter(bad))
    # the CLI, over the one client, prints the same CSV and a table
    url, token = jp_serverapp.connection_url, jp_serverapp.identity_provider.token

    def cli(*argv):
        out = io.StringIO()
        assert run(build_parser().parse_args(["--url", url, "--token", token, *argv]), out) == 0
        return out.getvalue()

    assert await asyncio.to_thread(cli, "usage", "--by", "user", "--csv") == text
    table = await asyncio.to_thread(cli, "usage", "--by", "tenant")
    assert table.splitlines()[0] == f"period: {report['period']} (UTC)"
    assert "vision" in table and "budget vision:" in table and "/ 100 gpu_hours (ok, soft)" in table
    code, q = await api("GET", "queues")
    bar = q["queues"]["vision"]["budget"]
    assert bar["budget"] == 100 and bar["unit"] == "gpu_hours" and bar["state"] == "ok" and bar["used"] > 0
    assert q["queues"]["nlp"]["budget"] is None


def test_bad_budget_config_fails_at_start_with_the_key():
    from jupyter_gpusched.core.budget import tenant_budgets

    with pytest.raises(ValueError, match=r"c.GPUSched.tenants\['vision'\]\['budget'\].period"):
        tenant_budgets({"vision": {"quota": 8, "budget": {"gpu_hours": 5, "period": "fortnight"}}})


def test_budget_warnings_reach_the_tenants_notification_targets(tmp_path):
    """The 80% and 100% warnings go to the tenant's configured targets (a real webhook receiver), once each."""
    from jupyter_gpusched.service.notify import NotifySettings
    from jupyter_gpusched.testing.receivers import Receiver
    from jupyter_gpusched.testing.waits import wait_for

    receiver = Receiver().start()
    try:
        service = service_in(
            tmp_path,
            LocalBackend(virtual_gpus=2, heartbeat_interval=0.5),
            tenants=(Tenant("vision", 2),),
            budgets={"vision": Budget(TINY, enforce="hard")},
            memory_check_interval=0.0,
            notify=NotifySettings(
                webhook_secret="s3cret", defaults={"tenants": {"vision": [{"webhook": receiver.url("/budget")}]}}
            ),
        )
        spend(service, tmp_path)
        for _ in range(5):
            service.tick()
        calls = wait_for(
            lambda: sum(c.json["event"] == "budget" for c in receiver.to("/budget")) >= 2 and receiver.to("/budget"),
            30,
            "two budget warnings",
        )
        assert all(c.signed_by("s3cret") for c in calls)
        bodies = [c.json for c in calls if c.json["event"] == "budget"]  # the job's own end uses them too
        assert len(bodies) == 2
        assert any("passed 80% of its gpu_hours budget" in b["message"] for b in bodies)
        assert any("reached its gpu_hours budget" in b["message"] for b in bodies)
        assert {b["tenant"] for b in bodies} == {"vision"}
        for _ in range(5):
            service.tick()
        assert sum(c.json["event"] == "budget" for c in receiver.to("/budget")) == 2  # not again later
        service.backend.close()
        service.notices.close()
    finally:
        receiver.stop()
