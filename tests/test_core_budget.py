"""Budgets in the core: periods, accounting against hand-computed figures, soft and hard enforcement."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from jupyter_gpusched.core import Cluster, JobSpec, JobState, NodeSpec, Pool, Priority, Scheduler, Tenant
from jupyter_gpusched.core.budget import (
    Budget,
    UsageLedger,
    budget_status,
    over_budget,
    parse_budget,
    period_bounds,
)
from jupyter_gpusched.core.cost import PriceList

H = 3600.0


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=timezone.utc).timestamp()


def test_parse_budget_errors_name_the_key():
    assert parse_budget("x", {"gpu_hours": 500}) == Budget(500.0)
    assert parse_budget("x", {"money": 10, "period": "week", "reset_day": 7, "enforce": "hard"}).unit == "money"
    for bad, words in [
        ({"gpu_hours": 1, "money": 2}, "exactly one"),
        ({"gpu_hours": -1}, "x.gpu_hours"),
        ({"gpu_hours": 1, "period": "year"}, "x.period"),
        ({"gpu_hours": 1, "reset_day": 31}, "1 to 28"),
        ({"gpu_hours": 1, "timezone": "Mars/Olympus"}, "x.timezone"),
        ({"gpu_hours": 1, "enforce": "strict"}, "x.enforce"),
        ({"gpu_hours": 1, "limit": 3}, "unknown budget key"),
        (500, "a budget is a dict"),
    ]:
        with pytest.raises(ValueError, match=words):
            parse_budget("x", bad)


def test_period_bounds_reset_day_and_timezone():
    # month from the 15th, in Berlin (UTC+1 in winter): 2026-11-15 00:00 CET .. 2026-12-15 00:00 CET
    b = Budget(1, period="month", reset_day=15, timezone="Europe/Berlin")
    start, end, label = period_bounds(b, utc(2026, 12, 3, 12))
    assert (start, end) == (utc(2026, 11, 14, 23), utc(2026, 12, 14, 23))
    assert label == "month from 2026-11-15"
    assert period_bounds(Budget(1), utc(2026, 12, 31, 23, 59))[1:] == (utc(2027, 1, 1), "2026-12")
    # week from Monday (reset_day 1); 2026-12-03 is a Thursday
    assert period_bounds(Budget(1, period="week"), utc(2026, 12, 3, 9))[:2] == (utc(2026, 11, 30), utc(2026, 12, 7))
    # a day in New York across the DST change (2026-03-08 has 23 hours)
    s, e, _ = period_bounds(Budget(1, period="day", timezone="America/New_York"), utc(2026, 3, 8, 12))
    assert e - s == 23 * H


def scripted() -> tuple[Scheduler, UsageLedger, float]:
    """Two pools (on-demand $3, spot $1 a GPU-hour), two tenants, a scripted day:
    A  vision/alice 2 GPUs on-demand   Dec 1 00:00-03:00  -> 6 GPU-h, $18
    B  vision/bob   1 GPU  spot        Dec 1 01:00-05:00  -> 4 GPU-h, $4, saved 4 x (3-1) = $8
    C  nlp/carol    2 GPUs on-demand   Dec 1 00:00-(running at 06:00) -> 12 GPU-h, $36
    D  nlp/carol    1 GPU  spot        Nov 30 23:00-Dec 1 01:00 -> 1 GPU-h in December, $1, saved $2
    E  vision/alice 1 GPU  on-demand   queued, never admitted -> nothing."""
    pools = [Pool("od", price_per_gpu_hour=3.0), Pool("spot", spot=True, price_per_gpu_hour=1.0)]
    cluster = Cluster([NodeSpec("n1", 4, "od"), NodeSpec("s1", 4, "spot")], pools)
    s = Scheduler(cluster, [Tenant("vision", 4), Tenant("nlp", 4)])
    ledger = UsageLedger(PriceList.of(pools))

    def feed():
        for e in s.drain_events():
            job = s.jobs[e.job_id]
            ledger.add(e, job.tenant, job.spec.owner, job.gpus, e.pool)

    def at(t, *specs):
        for jid, spec in specs:
            s.submit(spec, t, jid)
        s.schedule(t)
        for jid, _ in specs:
            if s.jobs[jid].state is JobState.ADMITTED:
                s.started(jid, t)
        feed()

    d0 = utc(2026, 12, 1)
    at(d0 - H, ("D", JobSpec("d.ipynb", 1, tenant="nlp", owner="carol", preemptible=True)))
    at(d0, ("A", JobSpec("a.ipynb", 2, tenant="vision", owner="alice")))
    at(d0, ("C", JobSpec("c.ipynb", 2, tenant="nlp", owner="carol")))
    s.finished("D", d0 + H, True)
    at(d0 + H, ("B", JobSpec("b.ipynb", 1, tenant="vision", owner="bob", preemptible=True)))
    at(d0 + 2 * H, ("E", JobSpec("e.ipynb", 1, tenant="vision", owner="alice")))  # n1 is full: waits
    s.finished("A", d0 + 3 * H, True)
    s.cancel("E", d0 + 3 * H)  # cancelled before its pass
    feed()
    s.finished("B", d0 + 5 * H, True)
    feed()
    return s, ledger, d0 + 6 * H


def test_accounting_matches_hand_computed_figures():
    s, ledger, now = scripted()
    assert [(h.job_id, h.pool) for h in ledger.held] == [("D", "spot"), ("A", "od"), ("C", "od"), ("B", "spot")]
    dec, jan = utc(2026, 12, 1), utc(2027, 1, 1)
    by_tenant = ledger.rows(dec, jan, now, "tenant")
    assert by_tenant == [
        {"tenant": "nlp", "jobs": 2, "gpu_hours": 13.0, "cost": 37.0, "spot_gpu_hours": 1.0, "spot_savings": 2.0},
        {"tenant": "vision", "jobs": 2, "gpu_hours": 10.0, "cost": 22.0, "spot_gpu_hours": 4.0, "spot_savings": 8.0},
    ]
    by_user = {r["user"]: (r["tenant"], r["gpu_hours"], r["cost"]) for r in ledger.rows(dec, jan, now, "user")}
    assert by_user == {"alice": ("vision", 6.0, 18.0), "bob": ("vision", 4.0, 4.0), "carol": ("nlp", 13.0, 37.0)}
    by_job = {r["job"]: r["gpu_hours"] for r in ledger.rows(dec, jan, now, "job")}
    assert by_job == {"A": 6.0, "B": 4.0, "C": 12.0, "D": 1.0}
    # November holds only D's first hour
    assert [r["gpu_hours"] for r in ledger.rows(utc(2026, 11, 1), dec, now, "tenant")] == [1.0]
    # what a pass asks: the same figures, incrementally
    assert ledger.tenant_spent("nlp", dec, now) == (13 * H, 37.0)
    assert ledger.tenant_spent("vision", dec, now) == (10 * H, 22.0)
    st = budget_status("vision", Budget(12.0), ledger, now)
    assert (st.used, st.state, st.level()) == (10.0, "warning", 80)
    st = budget_status("vision", Budget(20.0, unit="money", enforce="hard"), ledger, now)
    assert (st.used, st.state, st.level()) == (22.0, "over", 100)
    assert st.why() == (
        "tenant vision is over its money budget for 2026-12 (22/20); waits until 2027-01-01 00:00 UTC "
        "or an admin raises it"
    )


def test_incremental_spent_follows_a_closing_interval():
    s, ledger, now = scripted()
    dec = utc(2026, 12, 1)
    assert ledger.tenant_spent("nlp", dec, now)[0] == 13 * H  # caches the closed part
    s.finished("C", now, True)
    for e in s.drain_events():
        ledger.add(e, "nlp", "carol", 2, e.pool)
    assert ledger.tenant_spent("nlp", dec, now + 5 * H)[0] == 13 * H  # C closed at `now`: no more


def two_tenants() -> Scheduler:
    cluster = Cluster([NodeSpec("n1", 4)], [Pool("default")])
    return Scheduler(cluster, [Tenant("vision", 2), Tenant("nlp", 2)])


def test_hard_budget_holds_new_jobs_and_lets_running_finish():
    s = two_tenants()
    s.submit(JobSpec("r.ipynb", 1, tenant="vision"), 0, "running")
    s.schedule(0)
    s.started("running", 0)
    s.submit(JobSpec("new.ipynb", 1, tenant="vision"), 1, "new")
    s.set_budgets({"vision": "hard"}, {"vision": "tenant vision is over its gpu_hours budget"})
    assert s.schedule(2) == []
    assert s.jobs["running"].state is JobState.RUNNING  # never preempted for a budget
    assert s.jobs["new"].state is JobState.QUEUED
    assert s.jobs["new"].reason == "tenant vision is over its gpu_hours budget"
    s.submit(JobSpec("other.ipynb", 1, tenant="nlp"), 3, "other")
    assert [d.job_id for d in s.schedule(3)] == ["other"]  # other tenants are not held
    s.set_budgets({})  # the period reset
    assert [d.job_id for d in s.schedule(4)] == ["new"]


def test_soft_budget_lowest_class_and_no_borrowing():
    s = two_tenants()
    s.set_budgets(over_budget([]))
    s.submit(JobSpec("v1.ipynb", 1, tenant="vision", priority=Priority.HIGH), 0, "v1")
    s.submit(JobSpec("n1.ipynb", 1, tenant="nlp", priority=Priority.NORMAL), 0, "n1")
    order_before = [j.id for j in s.queue]
    s.set_budgets({"vision": "soft"})
    assert order_before == ["v1", "n1"]
    assert [j.id for j in s.queue] == ["n1", "v1"]  # dropped to the lowest class: behind nlp's job
    assert s.jobs["v1"].budget_demoted
    # within its quota it still runs; past it, it may not borrow idle GPUs
    for i in range(3):
        s.submit(JobSpec("v.ipynb", 1, tenant="vision"), 1, f"v{i + 2}")
    admitted = {d.job_id for d in s.schedule(1)}
    assert admitted == {"n1", "v1", "v2"}  # v3, v4 would borrow: held although 1 GPU is idle
    assert s.cluster.free_gpus == 1
    s.set_budgets({})
    assert {d.job_id for d in s.schedule(2)} == {"v3"}  # may borrow again
    assert not s.jobs["v4"].budget_demoted
