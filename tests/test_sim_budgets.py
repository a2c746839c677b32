"""The simulator honours budgets with the same core: a hard budget holds a tenant's jobs once spent."""

from __future__ import annotations

from jupyter_gpusched.core.budget import Budget
from jupyter_gpusched.core.model import NodeSpec, Priority, Tenant
from jupyter_gpusched.sim.engine import PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.traces import TraceJob

H = 3600.0
DAY = 24 * H  # the simulator's clock starts at 1970-01-01 00:00 UTC: a day budget resets at DAY


def job(i, tenant, submit, duration):
    return SimJob(TraceJob(f"j{i}", submit, duration, 1, tenant), Priority.NORMAL, False)


def replay(budgets):
    pools = [PoolConfig("od", tuple(NodeSpec(f"n{i}", 4, "od") for i in range(1)), price_per_gpu_hour=1.0)]
    jobs = [job(0, "a", 0, 3 * H), job(1, "a", 2.5 * H, 600), job(2, "b", 2.5 * H, 600)]
    sim = Simulation(jobs, pools, [Tenant("a", 2), Tenant("b", 2)], "dynamic", budgets=budgets, check_invariants=True)
    return {r.id: r for r in sim.run().jobs}


def test_hard_budget_holds_the_tenant_until_the_period_resets():
    free = replay({})
    assert free["j1"].first_start == 2.5 * H
    held = replay({"a": Budget(2.0, period="day", enforce="hard")})
    assert held["j0"].first_start == 0 and held["j0"].end == 3 * H  # running jobs finish
    assert held["j2"].first_start == 2.5 * H  # tenant b is not held
    assert held["j1"].first_start == DAY  # spent 2.5 of 2 GPU-hours at 2.5 h: waits for the next day


def test_soft_budget_does_not_hold_within_quota():
    soft = replay({"a": Budget(2.0, period="day", enforce="soft")})
    assert soft["j1"].first_start == 2.5 * H
