"""Engine invariants on small hand-made traces: every job ends exactly once, GPUs are never
over-allocated, preempted work is accounted, spot interruptions cost at most one checkpoint
interval, runs are deterministic, and no policy beats a lower bound."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from jupyter_gpusched.core.model import JobState, NodeSpec, Priority, Tenant
from jupyter_gpusched.core.policies import policy_names
from jupyter_gpusched.core.policies.spot_hybrid import SpotHybridPolicy
from jupyter_gpusched.core.policies.srpt import SrptOraclePolicy
from jupyter_gpusched.core.policies.tiresias import TiresiasPolicy
from jupyter_gpusched.sim.engine import CheckpointModel, Lifetime, PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.metrics import bounds, check_bounds, summarize
from jupyter_gpusched.sim.traces import TraceJob

ALL_POLICIES = ["static", "fifo", "priority", "dynamic", "spot-hybrid", "tiresias", "srpt"]


def pool(name="od", nodes=2, gpus=4, price=3.0, **kw) -> PoolConfig:
    return PoolConfig(
        name, tuple(NodeSpec(f"{name}-{i}", gpus, name) for i in range(nodes)), price, gpus_per_node=gpus, **kw
    )


def job(i, submit, duration, gpus=1, tenant="a", prio=Priority.NORMAL, pre=False, status="ok") -> SimJob:
    return SimJob(TraceJob(f"j{i}", float(submit), float(duration), gpus, tenant, status=status), prio, pre)


def random_jobs(n=60, seed=3, tenants=("a", "b", "c"), max_gpus=4) -> list[SimJob]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 300)
        out.append(
            job(
                i,
                t,
                rng.choice([60, 600, 1800, 5400, 14400]) * rng.uniform(0.5, 1.5),
                rng.choice([1, 1, 1, 2, 4][: 3 + (max_gpus >= 4) + (max_gpus >= 4)]),
                rng.choice(tenants),
                rng.choice(list(Priority)),
                rng.random() < 0.6,
            )
        )
    return out


def run(jobs, pools, tenants=(), policy="dynamic", **kw):
    kw.setdefault("check_invariants", True)
    sim = Simulation(jobs, pools, tenants, policy, **kw)
    return sim, sim.run()


TENANTS = [Tenant("a", 3), Tenant("b", 3), Tenant("c", 2)]
CKPT = CheckpointModel(interval_s=900, cost_s=20, restore_s=40)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_every_job_ends_exactly_once_and_gpus_never_overallocated(policy):
    jobs = random_jobs()
    sim, res = run(jobs, [pool()], TENANTS, policy, checkpoint=CKPT)  # check_invariants: every pass
    assert not res.stuck
    assert len(res.jobs) == len(jobs)
    assert {r.state for r in res.jobs} <= {"SUCCEEDED", "REJECTED"}
    assert all(r.end is not None for r in res.jobs if r.state == "SUCCEEDED")
    # the scheduler moved each submitted job into a terminal state exactly once
    ends = Counter()
    for job_ in sim.scheduler.jobs.values():
        assert job_.state.terminal
        ends[job_.id] += 1
    assert set(ends.values()) == {1}
    # allocated GPU-time never exceeds what was provisioned
    assert res.allocated_gpu_s <= res.provisioned_gpu_s + 1e-6


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_gpu_time_held_is_work_plus_lost_plus_overhead(policy):
    jobs = random_jobs(seed=11)
    _, res = run(jobs, [pool(nodes=2, gpus=4)], TENANTS, policy, checkpoint=CKPT)
    for r in res.jobs:
        if r.state != "SUCCEEDED":
            continue
        assert r.run_gpu_s == pytest.approx(r.duration * r.gpus + r.lost_gpu_s + r.overhead_gpu_s, rel=1e-9, abs=1e-6)
        assert r.end - r.submit >= r.duration - 1e-6
    total_held = sum(r.run_gpu_s for r in res.jobs)
    assert total_held == pytest.approx(res.allocated_gpu_s, rel=1e-9)


def test_reclaim_preempts_a_borrower_and_its_lost_work_is_accounted():
    # tenant a borrows the whole 4-GPU node, tenant b then asks for its quota back
    jobs = [job(0, 0, 10_000, gpus=4, tenant="a"), job(1, 1000, 500, gpus=2, tenant="b")]
    ck = CheckpointModel(interval_s=600, cost_s=10, restore_s=30)
    _, res = run(jobs, [pool(nodes=1, gpus=4)], [Tenant("a", 2), Tenant("b", 2)], "dynamic", checkpoint=ck)
    a, b = res.jobs
    assert a.preemptions == 1 and b.first_start == 1000
    # a ran 1000 s: one checkpoint done at 610 s (600 s kept), 390 s thrown away
    assert a.lost_gpu_s == pytest.approx(390 * 4)
    assert a.run_gpu_s == pytest.approx(a.duration * 4 + a.lost_gpu_s + a.overhead_gpu_s)
    assert a.state == b.state == "SUCCEEDED"


def test_a_job_without_checkpoints_loses_everything_when_preempted():
    jobs = [job(0, 0, 10_000, gpus=4, tenant="a"), job(1, 1000, 500, gpus=2, tenant="b")]
    _, res = run(jobs, [pool(nodes=1, gpus=4)], [Tenant("a", 2), Tenant("b", 2)], "dynamic")
    a = res.jobs[0]
    assert a.lost_gpu_s == pytest.approx(1000 * 4)
    assert a.end == pytest.approx(1500 + 10_000)  # restarts from scratch when b is done


def spot_pool(nodes=2, gpus=4, life=Lifetime("fixed", mean_s=3000), **kw):
    kw.setdefault("replace_after_s", 120)
    return pool("spot", nodes, gpus, 1.0, spot=True, lifetime=life, **kw)


def test_spot_interruptions_cost_at_most_one_interval_and_nodes_are_replaced():
    jobs = [job(i, i * 10, 20_000, gpus=2, tenant="a", pre=True) for i in range(4)]
    ck = CheckpointModel(interval_s=1200, cost_s=10, restore_s=30)
    sim, res = run(jobs, [spot_pool()], [Tenant("a", 8)], "dynamic", checkpoint=ck)
    assert res.interruptions >= 2 and not res.stuck
    for r in res.jobs:
        assert r.state == "SUCCEEDED"
        assert r.interruptions >= 1
        assert r.lost_gpu_s <= r.interruptions * (1200 + 10) * r.gpus + 1e-6
    # replacements keep the pool at 2 nodes: the cluster still has 2 spot nodes, new names
    assert len(sim.cluster.nodes_in("spot")) == 2
    assert all("new" in n for n in sim.cluster.nodes_in("spot"))


def test_spot_hybrid_checkpoints_below_the_shortest_lifetime():
    jobs = [job(i, i, 20_000, gpus=2, tenant="a", pre=True) for i in range(2)]
    ck = CheckpointModel(interval_s=3600, cost_s=10, restore_s=30)
    policy = SpotHybridPolicy(safety=0.5, prior_lifetime_s=2000)
    # lifetimes of 2500 s: the prior (2000 s) caps the interval at 1000 s from the start
    sim, res = run(jobs, [spot_pool(life=Lifetime("fixed", mean_s=2500))], [Tenant("a", 8)], policy, checkpoint=ck)
    assert policy.shortest_lifetime.get("spot", 0) == pytest.approx(2500, abs=1)
    for r in res.jobs:
        assert r.state == "SUCCEEDED" and r.interruptions >= 1
        assert r.lost_gpu_s <= r.interruptions * (1000 + 10) * r.gpus + 1e-6


def test_spot_hybrid_buys_spot_for_waiting_preemptible_work_and_gives_it_back():
    od = pool("od", nodes=1, gpus=4)
    sp = PoolConfig(
        "spot",
        (),
        1.0,
        spot=True,
        lifetime=Lifetime("fixed", mean_s=10**7),
        gpus_per_node=4,
        max_nodes=2,
        provision_s=100,
    )
    jobs = [job(i, 0, 3600, gpus=4, tenant="a", pre=True) for i in range(3)]
    jobs.append(job(9, 10_000, 100, gpus=1, tenant="a"))  # keeps the run going past the grace
    policy = SpotHybridPolicy(idle_grace_s=300, node_gpus=4)
    sim, res = run(jobs, [od, sp], [Tenant("a", 12)], policy)
    starts = sorted(r.first_start for r in res.jobs[:3])
    assert starts == [0, 100, 100]  # one on demand at once; two on spot nodes bought at t=0, up at 100 s
    assert res.scale_decisions >= 2
    assert sim.cluster.nodes_in("spot") == []  # given back after the grace
    # billed only while held: 100 s -> 3700 s of work, then the 300 s grace (a wakeup, no arrival then)
    assert res.provisioned_by_pool["spot"] == pytest.approx(2 * 4 * (3600 + 300), rel=1e-6)


def test_spot_hybrid_moves_preemptible_jobs_off_on_demand_for_those_that_need_it():
    od = pool("od", nodes=1, gpus=4)
    sp = PoolConfig(
        "spot",
        (),
        1.0,
        spot=True,
        lifetime=Lifetime("fixed", mean_s=10**7),
        gpus_per_node=4,
        max_nodes=1,
        provision_s=50,
    )
    ck = CheckpointModel(interval_s=300, cost_s=5, restore_s=10)
    jobs = [job(0, 0, 5000, gpus=4, tenant="a", pre=True), job(1, 500, 1000, gpus=4, tenant="a", pre=False)]
    _, res = run(jobs, [od, sp], [Tenant("a", 8)], "spot-hybrid", checkpoint=ck)
    pre, need = res.jobs
    assert pre.preemptions == 1  # moved to spot (bought for it) so the non-preemptible job got on-demand
    assert need.first_start == pytest.approx(550)
    assert pre.state == need.state == "SUCCEEDED"


def test_only_the_oracle_sees_runtimes():
    jobs = random_jobs(n=10)
    for name in ("dynamic", "tiresias", "static"):
        sim, _ = run(jobs, [pool()], TENANTS, name)
        assert all(j.spec.est_runtime is None for j in sim.scheduler.jobs.values())
    sim, _ = run(jobs, [pool()], TENANTS, "srpt")
    by_id = {j.trace.id: j.trace.duration for j in jobs}
    assert all(j.spec.est_runtime == by_id[j.id] for j in sim.scheduler.jobs.values())
    sim, _ = run(jobs, [pool()], TENANTS, "dynamic", estimates="exact")  # a scenario where users give estimates
    assert all(j.spec.est_runtime == by_id[j.id] for j in sim.scheduler.jobs.values())


def test_tiresias_demotes_a_long_job_for_a_short_one():
    jobs = [job(0, 0, 20_000, gpus=1), job(1, 5000, 100, gpus=1)]
    _, res = run(jobs, [pool(nodes=1, gpus=1)], (), "tiresias", checkpoint=CheckpointModel(interval_s=600))
    long_, short = res.jobs
    assert long_.preemptions == 1 and short.first_start == 5000
    assert short.end < long_.end


def test_tiresias_wakes_up_when_a_running_job_crosses_its_threshold():
    # b arrives while a (level 0) runs; a crosses 1 GPU-hour at t=3600 with nobody arriving then
    jobs = [job(0, 0, 20_000), job(1, 10, 7200)]
    _, res = run(jobs, [pool(nodes=1, gpus=1)], (), "tiresias")
    assert res.events["wakeup"] >= 1
    assert res.jobs[1].first_start == pytest.approx(3600, abs=1)


def test_srpt_preempts_for_a_much_shorter_job():
    jobs = [job(0, 0, 50_000, gpus=2), job(1, 1000, 200, gpus=2)]
    _, res = run(jobs, [pool(nodes=1, gpus=2)], (), "srpt", checkpoint=CheckpointModel(interval_s=500))
    long_, short = res.jobs
    assert long_.preemptions == 1 and short.first_start == 1000 and short.end == pytest.approx(1200)


@pytest.mark.parametrize("policy", [TiresiasPolicy, SrptOraclePolicy])
@pytest.mark.parametrize("preemptible", [False, True])
def test_baselines_told_to_preempt_only_preemptible_jobs_leave_the_others_running(policy, preemptible):
    jobs = [job(0, 0, 20_000, gpus=1, pre=preemptible), job(1, 5000, 100, gpus=1)]
    ck = CheckpointModel(interval_s=600)
    _, res = run(jobs, [pool(nodes=1, gpus=1)], (), policy(only_preemptible=True), checkpoint=ck)
    long_, short = res.jobs
    if preemptible:
        assert long_.preemptions == 1 and short.first_start == 5000
    else:
        assert long_.preemptions == 0 and short.first_start == 20_000


def test_same_seed_same_run_and_spot_schedule_depends_on_seed():
    jobs = random_jobs(n=40, seed=5)
    life = Lifetime("exponential", mean_s=4000, min_s=600)

    def once(seed):
        _, res = run(jobs, [pool(nodes=1), spot_pool(life=life)], TENANTS, "spot-hybrid", seed=seed, checkpoint=CKPT)
        return [(r.id, r.first_start, r.end, r.interruptions, r.lost_gpu_s) for r in res.jobs], res.interruptions

    assert once(7) == once(7)
    assert once(7) != once(8)


@pytest.mark.parametrize("policy", ALL_POLICIES)
def test_no_policy_beats_a_lower_bound(policy):
    jobs = random_jobs(n=80, seed=21)
    _, res = run(jobs, [pool(nodes=2, gpus=4)], TENANTS, policy, checkpoint=CKPT, check_invariants=False)
    s = summarize(res)
    assert check_bounds(s) == []
    b = bounds(res.jobs, res.capacity_max)
    assert s["makespan_s"] >= b["makespan_s"] - 1e-6
    assert s["avg_jct_s"] >= b["avg_jct_s"] - 1e-6
    assert 0 < s["utilization"] <= 1
    assert s["goodput"] <= b["goodput_max"] + 1e-9  # a fixed cluster here


def test_rejected_jobs_are_counted_not_run():
    # static gives tenant a 2 GPUs: its 4-GPU job can never run there
    jobs = [job(0, 0, 100, gpus=4, tenant="a"), job(1, 0, 100, gpus=1, tenant="a")]
    _, res = run(jobs, [pool(nodes=1, gpus=4)], [Tenant("a", 2), Tenant("b", 2)], "static")
    assert [r.state for r in res.jobs] == ["REJECTED", "SUCCEEDED"]
    assert "gpus" in res.jobs[0].reason
    assert summarize(res)["rejected"] == 1


def test_cancelled_jobs_are_withdrawn_at_their_time_whether_or_not_they_ran():
    jobs = [
        job(0, 0, 1000, gpus=4),  # occupies the node until 1000
        job(1, 10, 500, gpus=4, status="cancelled"),  # withdrawn at 510 while still waiting
        job(2, 20, 3000, gpus=2, status="cancelled"),  # starts at 1000, withdrawn at 3020
        job(3, 30, 100, gpus=1, status="failed"),
    ]
    _, res = run(jobs, [pool(nodes=1, gpus=4)], (), "fifo")
    a, b, c, d = res.jobs
    assert a.state == "SUCCEEDED"
    assert b.state == "CANCELLED" and b.first_start is None and b.end == 510
    assert c.state == "CANCELLED" and c.first_start == 1000 and c.end == 3020
    assert d.state == "FAILED" and d.end == pytest.approx(1100)
    s = summarize(res)
    assert s["jobs"] == 2 and s["cancelled"] == 2 and s["failed"] == 1


def test_engine_replays_state_through_the_scheduler_event_log():
    jobs = random_jobs(n=20)
    sim, res = run(jobs, [pool()], TENANTS, "dynamic", checkpoint=CKPT)
    # every transition the scheduler made was drained (as the service persists them)
    assert sim.scheduler.events == []
    assert res.transitions >= 3 * len(jobs)  # submit, admit, run, end at least
    assert all(j.state is JobState.SUCCEEDED for j in sim.scheduler.jobs.values())


def test_registered_policies_include_the_research_baselines():
    assert set(ALL_POLICIES) <= set(policy_names())
