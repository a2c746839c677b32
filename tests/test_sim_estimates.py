"""`jobs.estimates: learned` in the simulator: each job's estimate comes from the jobs that finished
before it arrived, never from its own runtime or a later job's."""

from __future__ import annotations

import pytest

from jupyter_gpusched.core.estimates import quantile
from jupyter_gpusched.core.model import NodeSpec, Priority, Tenant
from jupyter_gpusched.sim.engine import PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.scenario import ScenarioError, scenario_from_dict
from jupyter_gpusched.sim.traces import TraceJob


def job(i, submit, duration, gpus=1, tenant="a", status="ok") -> SimJob:
    return SimJob(
        TraceJob(f"j{i}", float(submit), float(duration), gpus, tenant, status=status), Priority.NORMAL, False
    )


def run(jobs, policy="dynamic", estimates="learned"):
    pool = PoolConfig("od", (NodeSpec("n0", 8, "od"),), 1.0, gpus_per_node=8)
    sim = Simulation(jobs, [pool], [Tenant("a", 4), Tenant("b", 4)], policy, estimates=estimates)
    return sim, sim.run()


def test_a_job_learns_only_from_jobs_that_finished_before_it_arrived():
    jobs = [
        job(0, 0, 100),
        job(1, 0, 200),
        job(2, 50, 9000),  # arrives before any finished: nothing to learn from
        job(3, 150, 7000),  # one run finished (j0): a key needs two
        job(4, 1000, 5000),  # j0, j1 finished: p80 of [100, 200]
        job(5, 1000, 300, tenant="b"),  # another tenant's runs teach it nothing
        job(6, 1000, 400, status="failed"),  # a failed run is not learned from
        job(7, 20_000, 60),  # j2, j3, j4 have finished too (j6 failed): its own 60 s is not among them
    ]
    sim, res = run(jobs)
    learned = {j.id: j.spec.learned_runtime for j in sim.scheduler.jobs.values()}
    assert learned["j2"] is None and learned["j3"] is None and learned["j5"] is None
    assert learned["j4"] == 200.0
    assert learned["j7"] == quantile([100.0, 200.0, 9000.0, 7000.0, 5000.0], 0.8) == 7000.0
    assert all(r.state in ("SUCCEEDED", "FAILED") for r in res.jobs)
    assert all(j.spec.est_runtime is None for j in sim.scheduler.jobs.values())


def test_none_is_the_default_and_the_oracle_ignores_learning():
    jobs = [job(0, 0, 100), job(1, 0, 200), job(2, 1000, 5000)]
    sim, _ = run(jobs, estimates="none")
    assert all(j.spec.learned_runtime is None for j in sim.scheduler.jobs.values())
    sim, _ = run(jobs, policy="srpt")  # the oracle reads true durations; nothing is learned for it
    assert all(j.spec.learned_runtime is None for j in sim.scheduler.jobs.values())
    assert sim.scheduler.jobs["j2"].spec.est_runtime == 5000.0
    with pytest.raises(ValueError, match="learned"):
        run(jobs, estimates="guess")


def test_the_scenario_option(tmp_path):
    (tmp_path / "t.csv").write_text("submit_time,duration,gpus\n0,60,1\n10,60,1\n")
    raw = {
        "trace": {"format": "csv", "path": "t.csv"},
        "pools": [{"name": "od", "nodes": 1, "gpus_per_node": 4}],
        "jobs": {"estimates": "learned"},
    }
    assert scenario_from_dict(raw, base=tmp_path).estimates == "learned"
    del raw["jobs"]
    assert scenario_from_dict(raw, base=tmp_path).estimates == "none"
    raw["jobs"] = {"estimates": "psychic"}
    with pytest.raises(ScenarioError, match="jobs.estimates"):
        scenario_from_dict(raw, base=tmp_path)


def test_a_queued_job_follows_the_runs_that_finish_while_it_waits():
    # one GPU: j1 and j2 wait behind j0; when j1 ends (the second run) j2, still queued, learns from both
    pool = PoolConfig("od", (NodeSpec("n0", 1, "od"),), 1.0, gpus_per_node=1)
    jobs = [job(0, 0, 100), job(1, 1, 200), job(2, 2, 5000), job(3, 3, 50, tenant="b")]
    sim = Simulation(jobs, [pool], [Tenant("a", 1), Tenant("b", 0)], "fifo", estimates="learned")
    res = sim.run()
    j = sim.scheduler.jobs
    assert j["j1"].spec.learned_runtime is None  # only j0 had finished when it started
    assert j["j2"].spec.learned_runtime == 200.0  # p80 of [100, 200]; never its own 5000
    assert j["j3"].spec.learned_runtime is None  # tenant b has no runs
    assert [r.state for r in res.jobs] == ["SUCCEEDED"] * 4
