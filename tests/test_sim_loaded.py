"""The loaded scenarios (philly-loaded, alibaba-loaded) and the load sweep (sim/loadsweep.py)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
import yaml

from jupyter_gpusched.sim import loadsweep
from jupyter_gpusched.sim.loadsweep import cut_windows, offered_load, scenario_at_load
from jupyter_gpusched.sim.scenario import load_scenario
from jupyter_gpusched.sim.traces import Trace, TraceJob, load_csv

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"GPU-cluster traces not found at {TRACES} (expected ../shared/traces)"
)


@needs_traces
@pytest.mark.parametrize(("name", "jobs", "gpus"), [("philly-loaded", 10_196, 536), ("alibaba-loaded", 2_560, 32)])
def test_loaded_scenarios_offer_about_0_8_of_their_cluster(name, jobs, gpus):
    sc = load_scenario(name, traces=TRACES)
    assert len(sc.jobs) == jobs and sc.capacity == gpus
    load = offered_load(sc.trace.jobs, sc.capacity, 14 * 24)
    assert 0.75 <= load <= 0.9, load
    # spot-hybrid's cluster is no larger than the others' at its largest
    assert sum(p.max_gpus for p in sc.pools_of("spot-hybrid")) <= gpus


@needs_traces
def test_the_whole_philly_trace_offers_about_0_8_of_its_cluster_and_overloads_it_for_weeks():
    sc = load_scenario("philly-loaded-full", traces=TRACES)
    assert len(sc.jobs) == 82_238 and sc.capacity == 472 and sc.trace.skipped == {"more than 32 GPUs": 9}
    t0 = min(j.submit for j in sc.trace.jobs)
    hours = (max(j.submit for j in sc.trace.jobs) - t0) / 3600
    assert 0.75 <= offered_load(sc.trace.jobs, sc.capacity, hours) <= 0.8
    weeks: dict[int, list] = {}
    for j in sc.trace.jobs:
        weeks.setdefault(int((j.submit - t0) / (7 * 86400)), []).append(j)
    weekly = [offered_load(jobs, sc.capacity, 7 * 24) for w, jobs in weeks.items() if w < hours // (7 * 24)]
    assert sum(load > 1 for load in weekly) >= 5  # what a whole-trace replay at 0.8 means on a trace this uneven


@needs_traces
@pytest.mark.parametrize("name", ["seed-3x8", "philly-loaded", "alibaba-loaded", "philly-loaded-full"])
def test_spot_hybrid_gets_an_on_demand_base_sized_to_the_work_that_may_not_run_on_spot(name):
    """One rule for the scenarios whose cluster is sized to a load: on-demand nodes =
    ceil(nodes x the GPU-hour share of non-preemptible jobs), spot up to the rest. A smaller
    base overloads it with work spot cannot take (on alibaba-loaded half the nodes gave 6-8x
    tiresias's JCT); a larger one pays on-demand for what spot could hold. (The scenarios on
    the traces' own, over-provisioned clusters keep half: their base holds that work many times.)"""
    sc = load_scenario(name, traces=TRACES)
    work = [(j.trace.duration * j.trace.gpus, j.preemptible) for j in sc.jobs if j.trace.status != "cancelled"]
    share = sum(w for w, pre in work if not pre) / sum(w for w, _ in work)
    node = max(p.node_gpus for p in sc.pools_of("fifo"))
    nodes = sc.capacity // node
    ondemand, spot = sc.pools_of("spot-hybrid")
    assert not ondemand.spot and spot.spot
    assert ondemand.max_gpus == math.ceil(nodes * share) * node, share
    assert spot.max_gpus == sc.capacity - ondemand.max_gpus
    assert max(j.trace.gpus for j in sc.jobs) <= ondemand.max_gpus  # every job fits the base


def _trace(days: int, per_day: int, seed: int = 3) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    for d in range(days):
        for k in range(per_day):
            t = d * 86400 + k * 86400 / per_day + rng.uniform(0, 60)
            jobs.append(
                TraceJob(
                    f"j{d}-{k}", t, rng.choice([600, 1800, 7200, 20_000]), rng.choice([1, 1, 2, 4]), rng.choice("AB")
                )
            )
    return jobs


def test_windows_alternate_development_and_held_out_and_drop_the_cut_short_last_one():
    jobs = _trace(5, 10)
    jobs.insert(0, TraceJob("lonely", -86400 * 2 + 5, 60, 1, "A"))  # a near-empty day before the rest
    wins = cut_windows(Trace(jobs), 1.0, min_jobs=5)
    # day -2 has 1 job (dropped), days 0..3 kept, day 4 is the last (the trace ends in it): dropped
    assert [w.start / 86400 for w in wins] == [0, 1, 2, 3]
    assert [w.held_out for w in wins] == [False, True, False, True]
    assert all(w.jobs == 10 for w in wins)
    assert wins[1].work_h == pytest.approx(
        sum(j.duration * j.gpus for j in jobs if 86400 <= j.submit < 2 * 86400) / 3600
    )


def _csv_scenario(tmp_path: Path) -> Path:
    rows = ["submit_time,duration,gpus,tenant,priority,preemptible"]
    for j in _trace(6, 40):
        rows.append(f"{j.submit:.0f},{j.duration:.0f},{j.gpus},{j.tenant},{'low' if j.gpus == 1 else 'normal'},true")
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "s.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "tiny",
                "trace": {"format": "csv", "path": "t.csv"},
                "pools": [{"name": "od", "nodes": 4, "gpus_per_node": 4, "price_per_gpu_hour": 1.0}],
                "tenants": [{"name": "A", "share": 1}, {"name": "B", "share": 1}],
                "jobs": {"checkpoint": {"interval_s": 1800, "cost_s": 10, "restore_s": 10, "applies_to": "all"}},
                "scheduler": {"aging_interval_s": 3600, "max_reservations": 1},
                "policies": ["static", "fifo", "dynamic", "tiresias", "srpt"],
            }
        )
    )
    return tmp_path / "s.yaml"


def test_a_window_at_a_load_offers_exactly_that_load(tmp_path):
    path = _csv_scenario(tmp_path)
    raw = yaml.safe_load(path.read_text())
    full = load_csv(tmp_path / "t.csv")
    w = cut_windows(full, 1.0)[1]
    for load in (0.6, 0.8, 0.95):
        sc = scenario_at_load(raw, path, None, full, w, load)
        hours = sc.notes["loadsweep"]["hours"]
        assert offered_load(sc.trace.jobs, sc.capacity, hours) == pytest.approx(load)
        assert sc.capacity % 4 == 0 and len(sc.jobs) == w.jobs
        assert 0.5 < sc.notes["loadsweep"]["stretch"] < 2  # whole nodes, then a small stretch
        assert min(j.trace.submit for j in sc.jobs) >= w.start


def test_a_tiny_sweep_prints_every_policy_at_every_load_and_plots(tmp_path, capsys):
    path = _csv_scenario(tmp_path)
    out_png = tmp_path / "plots" / "tiny.png"
    out_json = tmp_path / "tiny.json"
    argv = [str(path), "--days", "1", "--min-jobs", "5", "--loads", "0.6,0.95", "--plot", str(out_png)]
    rc = loadsweep.main([*argv, "--json", str(out_json)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "replaying the 2 held-out ones" in out  # days 1 and 3 of 0..4 (day 5 is cut short)
    for load in ("0.6", "0.95"):
        assert f"offered load {load} (reached {float(load):.3f}-{float(load):.3f}" in out
    table = [
        line.split() for line in out.splitlines() if line.split()[:1] in (["fifo"], ["dynamic"], ["tiresias"], ["srpt"])
    ]
    assert len(table) == 2 * 4 and "static" not in {r[0] for r in table}
    srpt = [r for r in table if r[0] == "srpt"]
    assert all(r[3] == "1.00" for r in srpt)  # JCT/srpt of srpt itself
    fifo = [r for r in table if r[0] == "fifo"]
    assert all(r[-2:] == ["1.00", "[1.00]"] for r in fifo)  # cost per job against fifo's, of fifo itself
    assert out_png.stat().st_size > 10_000
    doc = json.loads(out_json.read_text())
    assert doc["held_out"] and len(doc["windows"]) == 2
    assert doc["by_load"]["0.95"]["reached"] == pytest.approx([0.95, 0.95])
    assert doc["by_load"]["0.6"]["policies"]["srpt"]["jct/srpt"] == [1.0, 1.0]
    # the same pools, price and jobs: every policy pays for the cluster for as long as its work lasts
    for pol in ("dynamic", "tiresias"):
        assert all(0.9 < x < 1.3 for x in doc["by_load"]["0.95"]["policies"][pol]["cost/job/fifo"])
    # the development windows are the other ones
    rc = loadsweep.main([str(path), "--days", "1", "--min-jobs", "5", "--loads", "0.8", "--dev", "--windows", "1"])
    assert rc == 0 and "replaying the 1 development ones (day 0.0)" in capsys.readouterr().out
