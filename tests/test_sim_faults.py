"""Issue 12's faults, each as a small hand-made scenario replayed through the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jupyter_gpusched.core.model import NodeSpec, Priority, Tenant
from jupyter_gpusched.core.policies.spot_hybrid import SpotHybridPolicy
from jupyter_gpusched.core.scheduler import SchedulerConfig
from jupyter_gpusched.sim.engine import CheckpointModel, Lifetime, PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.metrics import summarize
from jupyter_gpusched.sim.report import bench_main, run_policy
from jupyter_gpusched.sim.scenario import ScenarioError, load_scenario
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


def test_fault1_under_sustained_load_a_job_larger_than_its_quota_is_granted_a_run_after_a_day():
    """Rule 7's bound. A's within-quota stream (2-GPU jobs every 300 s, 6.7 GPUs of demand on
    A's quota of 6) never leaves B's 4-GPU job a window: with no grant it waits for the
    stream to end. After `oversize_grant_after` (a day) it runs as if within quota: it gets
    the reservation, starts once a node drains, and A may not reclaim it."""
    stream = [sim_job(f"a{i}", 300 * i, 1000, 2, "A") for i in range(400)]  # 120,000 s of it
    huge = sim_job("b-huge", 5000, 3000, 4, "B")
    tenants = [Tenant("A", 6), Tenant("B", 2, burst=2)]
    runs = {}
    for after in (None, 86_400.0):
        config = SchedulerConfig(oversize_grant_after=after)
        sim = Simulation([*stream, huge], [od_pool()], tenants, "dynamic", config=config, check_invariants=True)
        (rec,) = [r for r in sim.run().jobs if r.id == "b-huge"]
        assert rec.state == "SUCCEEDED" and rec.preemptions == 0
        runs[after] = rec
    assert runs[None].first_start >= stream[-1].trace.submit  # only once A's stream has ended
    granted = runs[86_400.0]
    assert 5000 + 86_400 <= granted.first_start <= 5000 + 86_400 + 1000 + 300  # a day, then a node's drain


def test_scenario_oversize_grant_after_defaults_to_a_day_and_may_be_null(tmp_path):
    pools = "pools: [{name: od, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 1.0}]\n"
    assert csv_scenario(tmp_path, AGING_ROWS, pools).scheduler.oversize_grant_after == 86_400.0
    off = csv_scenario(tmp_path, AGING_ROWS, pools + "scheduler: {oversize_grant_after_s: null}\n")
    assert off.scheduler.oversize_grant_after is None
    with pytest.raises(ScenarioError, match="oversize_grant_after_s: must be at least 0"):
        csv_scenario(tmp_path, AGING_ROWS, pools + "scheduler: {oversize_grant_after_s: -1}\n")


def elastic_spot(max_nodes=2, gpus=4, life_s=10**7, **kw) -> PoolConfig:
    kw.setdefault("provision_s", 100)
    return PoolConfig(
        "spot",
        (),
        1.0,
        spot=True,
        lifetime=Lifetime("fixed", mean_s=life_s),
        gpus_per_node=gpus,
        max_nodes=max_nodes,
        **kw,
    )


def test_fault3_spot_hybrid_learns_lifetimes_from_interruptions_not_its_own_scale_ins():
    """Issue 12, fault 3. Spot nodes that never get reclaimed (lifetime 10^7 s) are bought for
    a burst of preemptible work and given back after the idle grace; a second burst follows.
    The scale-ins used to count as interruptions, so the policy learnt a lifetime of about
    the burst's length and capped the second burst's checkpoint interval far below 1 h."""
    burst = [sim_job(f"p{i}", 0, 1800, 4, "a", pre=True) for i in range(2)]
    later = [sim_job(f"q{i}", 5000, 7200, 4, "a", pre=True) for i in range(2)]
    policy = SpotHybridPolicy(idle_grace_s=300, node_gpus=4, prior_lifetime_s=10**6)
    ck = CheckpointModel(interval_s=3600, cost_s=10, restore_s=10)
    sim = Simulation([*burst, *later], [od_pool(1, 4), elastic_spot()], [Tenant("a", 12)], policy, checkpoint=ck)
    res = sim.run()
    assert res.scale_decisions >= 2 and res.interruptions == 0
    assert policy.shortest_lifetime == {}  # nothing was ever taken away
    q = [r for r in res.jobs if r.id.startswith("q")]
    assert all(r.state == "SUCCEEDED" for r in q)
    # 7200 s of work at one checkpoint an hour: 1 write (the run ends at the 2nd); not 1 a minute
    assert sum(r.overhead_gpu_s for r in q) <= 2 * 4 * (10 + 10) + 1e-6


def test_fault4_spot_hybrid_takes_a_preemptible_job_the_spot_pool_can_grow_to_hold():
    """Issue 12, fault 4a: a preemptible 6-GPU job on a 4-GPU on-demand base, with a spot pool
    that starts empty but may grow to 2 x 4 GPUs. It used to be refused at submit (the fit
    check used the pool's size then, 0); now spot is bought for it."""
    jobs = [sim_job("big-pre", 0, 3600, 6, "a", pre=True)]
    res = Simulation(jobs, [od_pool(1, 4), elastic_spot()], [Tenant("a", 12)], "spot-hybrid").run()
    (rec,) = res.jobs
    assert rec.state == "SUCCEEDED" and rec.first_start == 100  # when the spot nodes came up
    # without room to grow it is still refused, with the figure it was checked against
    res = Simulation(jobs, [od_pool(1, 4), elastic_spot(max_nodes=1)], [Tenant("a", 12)], "spot-hybrid").run()
    assert res.jobs[0].state == "REJECTED" and "has 4 that" in res.jobs[0].reason


def test_fault4_spot_hybrid_moves_preemptible_jobs_for_a_multi_node_job():
    """Issue 12, fault 4b: preemptible checkpointing jobs fill both on-demand nodes (spot was
    empty when they came); a high-priority 8-GPU job that may not run on spot needs both
    nodes. They used to be moved only for jobs that fit one node, so it waited for them to
    end (20,000 s); now both move to spot bought for them and it starts when spot is up."""
    ck = CheckpointModel(interval_s=300, cost_s=5, restore_s=10)
    jobs = [sim_job(f"pre{i}", 0, 20_000, 4, "a", pre=True) for i in range(2)]
    jobs.append(sim_job("wide", 500, 1000, 8, "a", Priority.HIGH, pre=False))
    res = Simulation(
        jobs,
        [od_pool(2, 4), elastic_spot(provision_s=50)],
        [Tenant("a", 16)],
        "spot-hybrid",
        checkpoint=ck,
        check_invariants=True,
    ).run()
    rec = {r.id: r for r in res.jobs}
    assert rec["wide"].first_start == 550
    assert rec["pre0"].preemptions == rec["pre1"].preemptions == 1
    assert all(r.state == "SUCCEEDED" for r in res.jobs)


def test_spot_hybrid_asks_spot_for_the_jobs_it_would_move_while_the_pool_can_grow():
    """Fault 8's make-room skip (`_spot_full`) at its edge: spot is full (1 of at most 3 nodes)
    and one preemptible job waits, which asks spot for a 2nd node only. The make-room walk must
    still run, so that the run to move off on-demand for the high-priority job is asked for
    too: both new nodes come at once and the job starts when they are up (600), not a round
    later (700)."""
    ck = CheckpointModel(interval_s=300, cost_s=5, restore_s=10)
    jobs = [
        sim_job("pre-od", 0, 20_000, 4, "a", pre=True),  # spot is empty: it runs on demand
        sim_job("pre-spot", 10, 20_000, 4, "a", pre=True),  # the first spot node, up at 110
        sim_job("pre-wait", 500, 20_000, 4, "a", pre=True),
        sim_job("high", 500, 1000, 4, "a", Priority.HIGH, pre=False),
    ]
    res = Simulation(
        jobs, [od_pool(1, 4), elastic_spot(max_nodes=3)], [Tenant("a", 16)], "spot-hybrid", checkpoint=ck,
        check_invariants=True,
    ).run()  # fmt: skip
    rec = {r.id: r for r in res.jobs}
    assert rec["pre-spot"].first_start == 110 and rec["pre-wait"].first_start == 600
    assert rec["high"].first_start == 600 and rec["pre-od"].preemptions == 1


def test_fault7_ratios_to_static_compare_the_same_jobs_and_utilisation_is_also_net(tmp_path, capsys):
    """Issue 12, fault 7. `static` rejects a's 4-GPU job (larger than a's 2-GPU partition), so
    its average JCT covered an easier job set than the others'. x/static JCT ratios are now
    over the jobs both completed and the table flags the difference; utilisation is also
    shown net of checkpoint writes and restores."""
    rows = "submit_time,duration,gpus,tenant,preemptible\n0,20000,4,a,true\n" + "".join(
        f"{100 + 300 * i},1800,1,{'ab'[i % 2]},true\n" for i in range(12)
    )
    (tmp_path / "t.csv").write_text(rows)
    (tmp_path / "s.yaml").write_text(
        "trace: {format: csv, path: t.csv}\n"
        "pools: [{name: od, nodes: 1, gpus_per_node: 4, price_per_gpu_hour: 1.0}]\n"
        "tenants: [{name: a, quota: 2}, {name: b, quota: 2}]\n"
        "jobs: {checkpoint: {interval_s: 600, cost_s: 30, restore_s: 60}}\n"
        "policies: [static, dynamic]\n"
    )
    out = tmp_path / "r.json"
    assert bench_main([str(tmp_path / "s.yaml"), "--json", str(out), "--no-progress"]) == 0
    table = capsys.readouterr().out
    pols = json.loads(out.read_text())["policies"]
    st, dy = pols["static"], pols["dynamic"]
    assert st["rejected"] == 1 and dy["jobs"] == 13
    vs = dy["vs_static"]
    assert vs["job_sets_differ"] and vs["common_jobs"] == 12 and vs["only_this"] == 1 and vs["only_ref"] == 0
    # the ratio is over the 12 jobs both completed, not dynamic's 13 against static's 12
    sc = load_scenario(tmp_path / "s.yaml")
    jct = {}
    for pol in ("static", "dynamic"):
        res = run_policy(sc, pol)
        jct[pol] = {r.id: r.end - r.submit for r in res.jobs if r.state == "SUCCEEDED"}
    common = sorted(jct["static"])
    expect = sum(jct["dynamic"][j] for j in common) / sum(jct["static"][j] for j in common)
    assert vs["avg_jct_s"] == pytest.approx(expect)
    assert vs["avg_jct_s"] != pytest.approx(dy["avg_jct_s"] / st["avg_jct_s"])
    assert "* the job sets differ" in table and "dynamic 12 (static 0, dynamic 1 alone)" in table
    # net utilisation: allocated less checkpoint overhead
    assert dy["gpu_hours_overhead"] > 0
    net = (dy["gpu_hours_allocated"] - dy["gpu_hours_overhead"]) / dy["gpu_hours_provisioned"]
    assert dy["utilization_net"] == pytest.approx(net) and dy["utilization_net"] < dy["utilization"]


def test_fault2_spot_hybrid_does_not_make_on_demand_room_for_a_job_past_its_tenants_older_waiter():
    """Issue 12, fault 2 in spot-hybrid (17 of the 51 seed-3x8 windows). A-old (2 GPUs,
    preemptible) waits: spot has one free GPU on each of its two nodes, on-demand one. A-high,
    submitted 7,201 s later (past a low job's 7,200 s aging bound) and not preemptible, used
    to be given room on on-demand by moving B's checkpointing job to spot: it passed A-old,
    which waited for the same GPUs. Now it stays behind A-old in A's line (queues.TenantLine)."""
    spot = PoolConfig(
        "spot",
        tuple(NodeSpec(f"spot-{i}", 2, "spot") for i in range(2)),
        0.3,
        spot=True,
        lifetime=Lifetime("fixed", mean_s=10**7),
        gpus_per_node=2,
        max_nodes=2,
    )
    jobs = [
        sim_job("B-s0", 0, 20_000, 1, "B", pre=True),
        sim_job("B-s0-short", 0, 50, 1, "B", pre=True),
        sim_job("B-s1", 0, 20_000, 1, "B", pre=True),
        sim_job("B-s1-short", 0, 50, 1, "B", pre=True),  # from 50: one free GPU on each spot node
        sim_job("B-np", 0, 20_000, 1, "B", Priority.HIGH),  # on-demand, not movable
        sim_job("B-ck", 0, 20_000, 1, "B", pre=True),  # spot is full: on-demand, movable
        sim_job("A-old", 100, 3600, 2, "A", Priority.LOW, pre=True),
        sim_job("A-high", 7301, 3600, 2, "A", Priority.HIGH),
    ]
    ck = CheckpointModel(interval_s=600, cost_s=5, restore_s=10)
    tenants = [Tenant("A", 8), Tenant("B", 12)]
    res = Simulation(
        jobs,
        [od_pool(1, 3), spot],
        tenants,
        "spot-hybrid",
        config=SchedulerConfig(max_reservations=0),
        checkpoint=ck,
        check_invariants=True,
    ).run()
    rec = {r.id: r for r in res.jobs}
    assert all(r.state == "SUCCEEDED" for r in res.jobs)
    assert rec["A-old"].first_start <= rec["A-high"].first_start
    assert rec["B-ck"].preemptions == 0
    assert summarize(res, 3600)["low_priority_overtaken"] == 0


def test_fault2_a_reservation_released_mid_pass_goes_to_the_tenants_older_job_first():
    """Issue 12, fault 2 through a reservation (one seed-3x8 window, in both policies). A-low
    came while A was at its limit, so B's R took the one reservation (a GPU was free). When
    the node drains, A-low is kept off it (reserved for R); R starts and frees the
    reservation in the same pass, and the rest of the node used to go to A-young, submitted
    7,400 s after A-low, which then waited for it. Now the pass starts again when a
    reservation is freed, so A-low takes the GPU in its turn."""
    jobs = [
        sim_job("A-run", 0, 10_000, 1, "A"),
        sim_job("B-run", 0, 10_000, 2, "B"),
        sim_job("A-low", 100, 3600, 1, "A", Priority.LOW),  # A at its limit: no reservation
        sim_job("R", 200, 3600, 2, "B", Priority.LOW),  # holds od-0's reservation
        sim_job("A-young", 7500, 3600, 1, "A", Priority.HIGH),
    ]
    tenants = [Tenant("A", 1, 0), Tenant("B", 5)]
    for policy in ("dynamic", "spot-hybrid"):
        res = Simulation(jobs, [od_pool(1, 4)], tenants, policy, check_invariants=True).run()
        rec = {r.id: r for r in res.jobs}
        assert rec["R"].first_start == 10_000, policy
        assert rec["A-low"].first_start == 10_000 < rec["A-young"].first_start, policy
        assert summarize(res, 3600)["low_priority_overtaken"] == 0, policy
