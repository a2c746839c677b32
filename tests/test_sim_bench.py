"""`bench`: a small window of the real traces through every policy; the JSON has every
metric and no policy beats a lower bound. Scenario files give clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jupyter_gpusched.sim.report import bench_main
from jupyter_gpusched.sim.scenario import ScenarioError, load_scenario

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = (PROJECT_ROOT / ".." / "shared" / "traces").resolve()
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"GPU-cluster traces not found at {TRACES} (expected ../shared/traces beside the project root)",
)

POLICIES = ["static", "fifo", "priority", "dynamic", "spot-hybrid", "tiresias", "srpt"]
METRICS = [
    "utilization", "avg_jct_s", "p99_jct_s", "makespan_s", "cost_total", "cost_per_job",
    "max_low_priority_wait_s", "jain_fairness", "preemptions", "jobs",
    "p50_jct_s", "goodput", "gpu_busy", "wait_by_tenant", "wait_by_priority", "gpu_hours_lost",
    "interruptions", "low_priority_overtaken", "events_per_s", "bounds", "vs_static", "vs_oracle",
]  # fmt: skip


def small_philly(tmp_path: Path, **over) -> Path:
    """6 hours of two real Philly VCs on 2 x 8 GPUs, with an elastic spot pool for spot-hybrid."""
    sc = {
        "name": "philly-small",
        "seed": 3,
        "trace": {
            "format": "philly",
            "path": str(TRACES / "microsoft_philly_2017" / "philly_jobs_pollux.csv.gz"),
            "window": {"start": "2017-10-16 09:00:00", "end": "2017-10-16 15:00:00"},
            "tenants": ["6214e9", "11cb48"],
            "max_gpus": 8,
        },
        "pools": [{"name": "ondemand", "nodes": 2, "gpus_per_node": 8, "price_per_gpu_hour": 3.0}],
        "pools_for": {
            "spot-hybrid": [
                {"name": "ondemand", "nodes": 1, "gpus_per_node": 8, "price_per_gpu_hour": 3.0},
                {
                    "name": "spot",
                    "spot": True,
                    "nodes": 0,
                    "max_nodes": 1,
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 0.9,
                    "lifetime": {"distribution": "exponential", "mean_s": 7200, "min_s": 900},
                },
            ]
        },
        "tenants": [{"name": "6214e9", "quota": 8}, {"name": "11cb48", "quota": 8}],
        "jobs": {
            "priority_mix": {"high": 1, "normal": 2, "low": 2},
            "preemptible": {"priorities": ["normal", "low"]},
            "checkpoint": {"interval_s": 1200, "cost_s": 20, "restore_s": 40},
        },
        "policies": POLICIES,
    }
    sc.update(over)
    p = tmp_path / "small.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


@needs_traces
def test_bench_on_a_real_window_writes_every_metric_and_respects_the_bounds(tmp_path, capsys):
    out = tmp_path / "out.json"
    rc = bench_main([str(small_philly(tmp_path)), "--json", str(out), "--plots", str(tmp_path / "plots"), "--check"])
    assert rc == 0
    table = capsys.readouterr().out
    for pol in POLICIES:
        assert f"\n{pol} " in table
    assert "bounds hold for every policy" in table and "events/s" in table
    report = json.loads(out.read_text())
    assert report["scenario"]["name"] == "philly-small" and report["scenario"]["trace"]["jobs"] > 20
    assert set(report["policies"]) == set(POLICIES)
    assert report["bounds"]["makespan_s"] > 0 and report["bounds"]["avg_jct_s"] > 0
    for name, s in report["policies"].items():
        for key in METRICS:
            assert key in s, f"{name} lacks {key}"
        assert s["jobs"] == report["scenario"]["trace"]["jobs"] and s["unfinished"] == 0
        assert 0 < s["utilization"] <= 1 and 0 < s["jain_fairness"] <= 1
        assert s["bound_violations"] == []
        assert s["makespan_s"] >= report["bounds"]["makespan_s"] - 1e-6
        assert s["avg_jct_s"] >= report["bounds"]["avg_jct_s"] - 1e-6
        assert s["p99_jct_s"] >= s["p50_jct_s"]
        assert s["gpu_busy"] is None  # Philly says nothing about GPU activity
    assert report["policies"]["static"]["vs_static"]["avg_jct_s"] == pytest.approx(1.0)
    assert report["policies"]["srpt"]["vs_oracle"]["avg_jct_s"] == pytest.approx(1.0)
    assert report["policies"]["spot-hybrid"]["cost_by_pool"].keys() == {"ondemand", "spot"}
    for png in ("utilization.png", "jct_cdf.png", "queue_length.png", "wait_by_size.png"):
        assert (tmp_path / "plots" / png).stat().st_size > 5_000


@needs_traces
def test_bench_runs_a_builtin_scenario_by_name(capsys):
    rc = bench_main(["seed-3x8", "--limit", "60", "--policies", "static,dynamic", "--no-progress"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "scenario seed-3x8: 60 jobs" in out and "\ndynamic " in out and "\nfifo " not in out


@needs_traces
@pytest.mark.parametrize("columns", [80, 120])
def test_bench_tables_fit_the_terminal_and_wide_shows_every_column(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    args = ["seed-3x8", "--limit", "60", "--policies", "static,dynamic,spot-hybrid", "--no-progress"]
    assert bench_main(args) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines() if not line.startswith("scenario ")) <= columns, out
    assert "avgJCT h" in out and "JCT/static" in out and "--wide shows all" in out
    assert bench_main([*args, "--wide"]) == 0
    wide = capsys.readouterr().out
    assert all(name in wide for name in ("cost/static", "util/static", "Jain", "of it spot")) and "--wide" not in wide


@needs_traces
def test_alibaba_window_reports_gpu_busy_and_statuses(tmp_path):
    sc = {
        "name": "alibaba-small",
        "trace": {
            "format": "alibaba-2023",
            "path": "${traces}/alibaba_gpu_v2023/openb_pod_list_default.csv.gz",
            "limit": 400,
        },
        "pools": [{"name": "od", "nodes": 4, "gpus_per_node": 8, "price_per_gpu_hour": 2.0}],
        "tenants": [{"name": n, "share": 1} for n in ("ls", "be", "burstable", "guaranteed")],
        "jobs": {"preemptible": "trace", "checkpoint": {"interval_s": 1800, "applies_to": "preemptible"}},
        "policies": ["static", "dynamic"],
    }
    p = tmp_path / "ali.yaml"
    p.write_text(yaml.safe_dump(sc))
    out = tmp_path / "ali.json"
    assert bench_main([str(p), "--json", str(out), "--no-progress", "--traces", str(TRACES)]) == 0
    s = json.loads(out.read_text())["policies"]["dynamic"]
    assert 0 < s["gpu_busy"] <= s["utilization"]  # a pod holding a whole GPU may use a share of it
    assert s["failed"] > 0 and s["jobs"] == s["succeeded"] + s["failed"]
    assert s["jobs"] + s["cancelled"] == 400


def test_user_csv_trace_scenario(tmp_path, capsys):
    (tmp_path / "mine.csv").write_text(
        "submit_time,duration,gpus,tenant,priority,preemptible\n"
        + "".join(
            f"{i * 120},{600 + 300 * (i % 5)},{1 + i % 3},{'ab'[i % 2]},{['high', 'normal', 'low'][i % 3]},{i % 2 == 0}\n"
            for i in range(40)
        )
    )
    (tmp_path / "mine.yaml").write_text(
        "trace: {format: csv, path: mine.csv}\n"
        "pools: [{name: od, nodes: 2, gpus_per_node: 4, price_per_gpu_hour: 2.5}]\n"
        "tenants: [{name: a, quota: 4}, {name: b, quota: 4}]\n"
    )
    out = tmp_path / "o.json"
    assert bench_main([str(tmp_path / "mine.yaml"), "--json", str(out), "--no-progress"]) == 0
    report = json.loads(out.read_text())
    assert report["scenario"]["name"] == "mine" and set(report["policies"]) == set(POLICIES)
    assert report["scenario"]["priorities"] == {"high": 14, "normal": 13, "low": 13}  # the trace's own
    assert all(s["jobs"] == 40 and not s["bound_violations"] for s in report["policies"].values())


@pytest.mark.parametrize(
    ("patch", "field", "words"),
    [
        (
            {"pools": [{"name": "od", "nodes": 2, "gpus_per_node": 4, "colour": "red"}]},
            "pools[0].colour",
            "unknown field",
        ),
        (
            {"pools": [{"name": "od", "nodes": 2, "gpus_per_node": 4, "lifetime": {"mean_s": 60}}]},
            "pools[0].lifetime",
            "only spot",
        ),
        (
            {"pools": [{"name": "s", "spot": True, "nodes": 1, "gpus_per_node": 4}]},
            "pools[0].lifetime",
            "needs a lifetime",
        ),
        ({"pools": [{"name": "od", "nodes": 2}]}, "pools[0].gpus_per_node", "required"),
        # issue 12, fault 6: impossible pool sizes used to be accepted silently
        (
            {"pools": [{"name": "od", "nodes": 4, "max_nodes": 2, "gpus_per_node": 4}]},
            "pools[0].max_nodes",
            "starts with 4",
        ),
        (
            {"pools": [{"name": "od", "nodes": 1, "min_nodes": 3, "max_nodes": 1, "gpus_per_node": 4}]},
            "pools[0].max_nodes",
            "below min_nodes (3)",
        ),
        ({"policies": ["static", "magic"]}, "policies[1]", "expected one of"),
        ({"tenants": [{"name": "a", "quota": 2, "share": 1}]}, "tenants[0]", "exactly one"),
        ({"jobs": {"checkpoint": {"interval_s": -5}}}, "jobs.checkpoint.interval_s", "above 0"),
        ({"trace": {"format": "csv", "path": "nope.csv"}}, "trace.path", "file not found"),
        (
            {"trace": {"format": "csv", "path": "mine.csv", "window": {"start": "2024-01-01"}}},
            "trace.window.start",
            "seconds",
        ),
        ({"policy_options": {"spot-hybrid": {"safety": 3}}}, "policy_options.spot-hybrid", "between 0 and 1"),
    ],
)
def test_scenario_errors_name_the_field(tmp_path, capsys, patch, field, words):
    (tmp_path / "mine.csv").write_text("submit_time,duration,gpus\n0,60,1\n")
    raw = {"trace": {"format": "csv", "path": "mine.csv"}, "pools": [{"name": "od", "nodes": 1, "gpus_per_node": 4}]}
    raw.update(patch)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ScenarioError) as err:
        load_scenario(p)
    assert err.value.field == field and words in str(err.value) and "bad.yaml" in str(err.value)
    assert bench_main([str(p), "--no-progress"]) == 2
    assert field in capsys.readouterr().err


def test_unknown_scenario_and_policy(capsys, tmp_path):
    assert bench_main(["no-such-scenario"]) == 2
    err = capsys.readouterr().err
    assert "unknown scenario" in err and "seed-3x8" in err  # names the built-in ones
    (tmp_path / "t.csv").write_text("submit_time,duration,gpus\n0,60,1\n")
    (tmp_path / "s.yaml").write_text(
        "trace: {format: csv, path: t.csv}\npools: [{name: od, nodes: 1, gpus_per_node: 2}]\n"
    )
    assert bench_main([str(tmp_path / "s.yaml"), "--policies", "dynamic,magic"]) == 2
    assert "unknown policy 'magic'" in capsys.readouterr().err


@needs_traces
def test_seed_window_is_the_one_the_selection_rule_picks():
    from jupyter_gpusched.sim.traces import load_philly
    from jupyter_gpusched.sim.windows import candidate_windows, chosen

    tr = load_philly(TRACES / "microsoft_philly_2017" / "philly_jobs_pollux.csv.gz")
    vcs = "6214e9,7f04ca,11cb48,b436b2,ee9e8c,e13805,6c71a0,2869ce,ed69ec,103959,0e4a51".split(",")
    wins = candidate_windows(tr, 24, tenants=vcs, k=4, hours=24, step_h=6, max_gpus=6)
    assert len(wins) == 51
    pick = chosen(wins)
    sc = load_scenario("seed-3x8")
    assert pick.label(tr) == "2017-10-14 18:00" and set(pick.tenants) == set(sc.tenant_terms)
    assert pick.jobs == len(sc.jobs) == 295


@needs_traces
def test_seed_override_redraws_priorities(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for seed, out in ((1, a), (2, b)):
        assert (
            bench_main(
                [
                    "seed-3x8",
                    "--limit",
                    "80",
                    "--policies",
                    "dynamic",
                    "--seed",
                    str(seed),
                    "--json",
                    str(out),
                    "--no-progress",
                ]
            )
            == 0
        )
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ra["scenario"]["seed"] == 1 and rb["scenario"]["seed"] == 2
    assert ra["scenario"]["priorities"] != rb["scenario"]["priorities"]


def test_builtin_scenarios_ship_inside_the_package(tmp_path):
    """Issue 12, fault 5: the built-in scenarios lived in benchmarks/, which a wheel lacks, so
    `bench seed-3x8` elsewhere said "unknown scenario ... none found". A copy of the package
    alone (as a wheel installs it), imported from another directory, finds them."""
    import shutil
    import subprocess
    import sys

    import jupyter_gpusched

    pkg = Path(jupyter_gpusched.__file__).parent
    shutil.copytree(
        pkg, tmp_path / "site" / "jupyter_gpusched", ignore=shutil.ignore_patterns("labextension", "__pycache__")
    )
    code = "from jupyter_gpusched.sim.scenario import builtin_scenarios as b, find_scenario as f; print(b(), f('seed-3x8'))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "'seed-3x8'" in out and "'philly-full'" in out
    assert str(tmp_path / "site" / "jupyter_gpusched" / "sim" / "scenarios" / "seed-3x8.yaml") in out


def test_bench_says_which_rows_of_the_trace_it_left_out(tmp_path, capsys):
    (tmp_path / "log.csv").write_text("submit_time,duration,gpus\n0,600,1\n5,600,0\n9,0,2\n20,300,2\n")
    sc = {
        "name": "log",
        "trace": {"format": "csv", "path": "log.csv"},
        "pools": [{"name": "ondemand", "nodes": 1, "gpus_per_node": 4}],
        "policies": ["fifo"],
    }
    (tmp_path / "log.yaml").write_text(yaml.safe_dump(sc))
    assert bench_main([str(tmp_path / "log.yaml"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "scenario log: 2 jobs" in out and "left out of the trace: CPU-only jobs: 1; zero-length jobs: 1" in out


def test_job_sizes_are_classed_in_powers_of_two_and_the_report_shows_their_waits(tmp_path, capsys):
    from jupyter_gpusched.sim.metrics import size_class

    assert [size_class(g) for g in (1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33)] == [
        "1", "2", "3-4", "3-4", "5-8", "5-8", "9-16", "9-16", "17-32", "17-32", "33-64",
    ]  # fmt: skip
    # one node of 8: the 8-GPU job waits for the three 1-GPU jobs to end (fifo), the 1-GPU ones do not
    (tmp_path / "t.csv").write_text("submit_time,duration,gpus\n0,3600,1\n0,3600,1\n0,3600,1\n10,600,8\n")
    sc = {"name": "t", "trace": {"format": "csv", "path": "t.csv"}, "policies": ["fifo"]}
    sc["pools"] = [{"name": "ondemand", "nodes": 1, "gpus_per_node": 8}]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(sc))
    assert bench_main([str(tmp_path / "t.yaml"), "--no-progress", "--json", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    table = out[out.index("queueing delay by job size") :].splitlines()
    assert table[1].split() == ["policy", "1", "GPU", "5-8"] and table[3].split() == [
        "fifo",
        "0.00",
        "/",
        "0.00",
        "1.00",
        "/",
        "1.00",
    ]
    waits = json.loads((tmp_path / "t.json").read_text())["policies"]["fifo"]["wait_by_size"]
    assert waits["5-8"]["max_s"] == pytest.approx(3590) and waits["1"]["jobs"] == 3
