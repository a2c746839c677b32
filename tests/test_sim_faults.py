"""Issue 12's faults, each as a small hand-made scenario replayed through the simulator."""

from __future__ import annotations

from pathlib import Path

from jupyter_gpusched.core.model import NodeSpec, Priority, Tenant
from jupyter_gpusched.sim.engine import PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.metrics import summarize
from jupyter_gpusched.sim.report import run_policy
from jupyter_gpusched.sim.scenario import load_scenario
from jupyter_gpusched.sim.traces import TraceJob


def csv_scenario(tmp_path: Path, rows: str, yaml_text: str):
    (tmp_path / "t.csv").write_text(rows)
    (tmp_path / "s.yaml").write_text("trace: {format: csv, path: t.csv}\n" + yaml_text)
    return load_scenario(tmp_path / "s.yaml")


AGING_ROWS = """submit_time,duration,gpus,tenant,priority,preemptible,job_id
0,100000,3,A,normal,false,A1-running
0,100000,2,B,normal,false,B1-running
100,3600,4,A,normal,false,A-big
200,3600,1,A,low,false,A-low
7500,3600,2,A,low,false,A-late
"""
AGING_YAML = """pools: [{name: od, nodes: 2, gpus_per_node: 4, price_per_gpu_hour: 1.0}]
tenants: [{name: A, quota: 4}, {name: B, quota: 4}]
scheduler: {aging_interval_s: 3600, max_reservations: 0}
"""


def test_fault2_aging_order_a_tenants_later_borrower_does_not_pass_its_waiting_low_job(tmp_path):
    """Issue 12, fault 2 (verbatim scenario). A-big waits for A's own quota, so A-low (within
    quota) is held behind it; A-late, submitted 7,300 s after A-low (over the 7,200 s aging
    bound of a low job), used to start at once by borrowing."""
    sc = csv_scenario(tmp_path, AGING_ROWS, AGING_YAML)
    for policy in ("dynamic", "spot-hybrid"):
        res = run_policy(sc, policy, check_invariants=True)
        start = {r.id: r.first_start for r in res.jobs}
        assert start["A-late"] >= start["A-low"], policy
        assert summarize(res, 3600)["low_priority_overtaken"] == 0, policy


def od_pool(nodes=2, gpus=4, name="od", **kw) -> PoolConfig:
    return PoolConfig(
        name, tuple(NodeSpec(f"{name}-{i}", gpus, name) for i in range(nodes)), 1.0, gpus_per_node=gpus, **kw
    )


def sim_job(job_id, submit, duration, gpus, tenant, prio=Priority.NORMAL, pre=False) -> SimJob:
    return SimJob(TraceJob(job_id, float(submit), float(duration), gpus, tenant), prio, pre)


def test_fault1_a_job_larger_than_its_quota_neither_reserves_nor_livelocks():
    """Issue 12, fault 1. B's 8-GPU job is twice B's quota: it can only borrow. It used to
    reserve both nodes, so A's stream of within-quota jobs waited on idle GPUs until it
    started, and then A reclaimed it at once -- again and again. Now it holds no nodes, is
    not started while A's within-quota jobs wait, and runs in the window A leaves free."""
    stream = [sim_job(f"a{i}", 600 * i, 1000, 2, "A") for i in range(30)]
    huge = sim_job("b-huge", 10, 3000, 8, "B")
    tenants = [Tenant("A", 4), Tenant("B", 4)]
    res = Simulation([*stream, huge], [od_pool()], tenants, "dynamic", check_invariants=True).run()
    rec = {r.id: r for r in res.jobs}
    assert rec["b-huge"].state == "SUCCEEDED" and rec["b-huge"].preemptions == 0
    assert rec["b-huge"].first_start >= rec["a29"].submit  # the window after A's stream
    assert max(r.first_start - r.submit for r in res.jobs if r.tenant == "A") == 0  # A never waits
