"""Every policy at a chosen offered load, over many windows of a real trace.

    python -m jupyter_gpusched.sim.loadsweep philly-loaded            # held-out windows, loads 0.6 0.8 0.95
    python -m jupyter_gpusched.sim.loadsweep alibaba-loaded --plot benchmarks/plots/loadsweep/alibaba.png

The scenario's whole trace (its tenant and size filters apply, its own window does not) is
cut into consecutive `--days`-long windows from the midnight before its first job (from 0
where the trace has no clock); windows with fewer than `--min-jobs` jobs, and the last one
(the trace ends inside it), are dropped. The
rest are numbered in time order and the odd ones are held out: the scenarios, cluster
shapes and policy settings were chosen without looking at them, and the sweep replays
them unless `--dev` is given (then the even ones).

For a window and a load L the cluster is the scenario's, every pool's node counts
(`nodes`, `min_nodes`, `max_nodes`) scaled by one factor so that the offered load is L:

    offered load = GPU-hours of the window's jobs / (GPUs of the cluster x hours of the window)

counting each job's trace duration x GPUs (jobs the trace says were withdrawn before they
ran -- Alibaba's Pending pods -- are not work). Node counts are whole: what rounding leaves
over is made up by stretching the window's arrival times about its start (x0.9-1.1 on a
cluster of tens of nodes; more on Alibaba's few), so the load is L. The stretch is printed.
Tenants' `share`s become quotas of the scaled cluster.

Per policy it prints, over the windows: the median and the worst (largest) ratio of its
average JCT to tiresias's, to the srpt oracle's and to fifo's, each on the jobs both
completed; the median and worst GPU-hours lost to preemption and interruption; and the
aging-order violations (`low_priority_overtaken`, summed, and in how many windows); and the
median and worst ratio of its cost per completed job to fifo's. fifo runs on the scenario's
own pools, which every fixed-pool policy pays for alike (`static` too, a little more per job
where it takes longer or rejects jobs); `spot-hybrid`, on its own pools, is what the figure is for.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import yaml

from .config import ESTIMATES, SimJob
from .metrics import compare_on_common_jobs, summarize
from .report import run_policy
from .scenario import Scenario, ScenarioError, find_scenario, override, scenario_from_dict, traces_dir
from .traces import Trace, TraceError, TraceJob, load_trace

DEFAULT_LOADS = (0.6, 0.8, 0.95)
REFERENCES = ("tiresias", "srpt", "fifo")


def offered_work_h(jobs: Sequence[TraceJob]) -> float:
    """GPU-hours the jobs ask for (withdrawn-before-running jobs excluded)."""
    return sum(j.duration * j.gpus for j in jobs if j.status != "cancelled") / 3600.0


def offered_load(jobs: Sequence[TraceJob], capacity_gpus: int, hours: float) -> float:
    return offered_work_h(jobs) / (capacity_gpus * hours) if capacity_gpus > 0 and hours > 0 else math.inf


@dataclass(frozen=True)
class Window:
    index: int  # 0-based in time order among the kept windows; odd ones are held out
    start: float
    end: float
    jobs: int
    work_h: float

    @property
    def held_out(self) -> bool:
        return self.index % 2 == 1

    def label(self, trace: Trace) -> str:
        if trace.origin is None:
            return f"day {self.start / 86400:.1f}"
        return (trace.origin + timedelta(seconds=self.start)).strftime("%Y-%m-%d")


def cut_windows(trace: Trace, days: float, min_jobs: int = 1) -> list[Window]:
    """Consecutive `days`-long windows over the trace (see the module doc)."""
    if not trace.jobs:
        return []
    length = days * 86400.0
    shift = 0.0
    if trace.origin is not None:
        o = trace.origin
        shift = o.hour * 3600 + o.minute * 60 + o.second + o.microsecond / 1e6
    t = math.floor((trace.jobs[0].submit + shift) / 86400.0) * 86400.0 - shift
    out: list[Window] = []
    i, jobs = 0, trace.jobs
    while i < len(jobs):
        end = t + length
        k = i
        while k < len(jobs) and jobs[k].submit < end:
            k += 1
        if k - i >= min_jobs and k < len(jobs):  # the last window is cut short by the trace's end: dropped
            out.append(Window(len(out), t, end, k - i, offered_work_h(jobs[i:k])))
        i, t = k, end
    return out


def _pool_gpus(pools: list[dict]) -> int:
    total = 0
    for p in pools:
        if "node_list" in p:
            raise ScenarioError(p.get("name", "?"), "the load sweep scales pools given as `nodes`, not node lists")
        total += int(p.get("nodes", 0)) * int(p.get("gpus_per_node", 0))
    return total


def _scaled(pools: list[dict], factor: float) -> list[dict]:
    out = []
    for p in pools:
        q = dict(p)
        for k in ("nodes", "min_nodes", "max_nodes"):
            if q.get(k):
                q[k] = max(1, round(q[k] * factor))
        if q.get("max_nodes") is not None and q["max_nodes"] < q.get("nodes", 0):
            q["max_nodes"] = q["nodes"]
        out.append(q)
    return out


def scenario_at_load(raw: dict, path: Path, traces: Path | None, full: Trace, w: Window, load: float) -> Scenario:
    """The scenario on window `w` at offered load `load`: its pools' node counts scaled by
    one factor (rounded to whole nodes), then the window's arrival times stretched about
    its start by what rounding left over, so the load is `load` exactly (see the module doc)."""
    r2 = copy.deepcopy(raw)
    hours = (w.end - w.start) / 3600.0
    base_gpus = _pool_gpus(raw["pools"])
    factor = w.work_h / (load * hours) / base_gpus
    r2["pools"] = _scaled(raw["pools"], factor)
    r2["pools_for"] = {pol: _scaled(pools, factor) for pol, pools in (raw.get("pools_for") or {}).items()}
    r2["trace"]["window"] = (
        {"start": w.start, "end": w.end}
        if full.origin is None
        else {
            "start": (full.origin + timedelta(seconds=w.start)).isoformat(sep=" "),
            "end": (full.origin + timedelta(seconds=w.end)).isoformat(sep=" "),
        }
    )
    sc = scenario_from_dict(r2, where=str(path), base=path.parent, traces=traces, path=path)
    stretch = w.work_h / (load * sc.capacity * hours)
    if abs(stretch - 1.0) > 1e-9:
        sc.jobs = [
            SimJob(replace(j.trace, submit=w.start + (j.trace.submit - w.start) * stretch), j.priority, j.preemptible)
            for j in sc.jobs
        ]
        sc.trace = sc.trace.with_jobs([j.trace for j in sc.jobs])
    sc.notes = {**sc.notes, "loadsweep": {"load": load, "stretch": stretch, "hours": hours * stretch}}
    return sc


def full_trace(raw: dict, path: Path, traces: Path | None) -> Trace:
    """The scenario's trace with its tenant and size filters, without its window."""
    tv = raw["trace"]
    tpath = tv["path"].replace("${traces}", str(traces)) if traces else tv["path"]
    trace = load_trace(tv["format"], tpath if tpath.startswith("/") else path.parent / tpath)
    return trace.select(tenants=tv.get("tenants"), max_gpus=tv.get("max_gpus"))


@dataclass
class LoadSweep:
    """A scenario's whole trace cut into windows, each replayable at any offered load: what the
    load sweep replays, for the sweep itself and for benchmarks that replay its windows."""

    raw: dict  # the scenario as read (with any overrides applied)
    path: Path
    traces: Path | None
    trace: Trace  # the whole trace, with the scenario's tenant and size filters
    windows: list[Window]

    @classmethod
    def from_raw(cls, raw: dict, path: Path, traces: str | Path | None, days: float, min_jobs: int) -> LoadSweep:
        tdir = traces_dir(path.parent, traces)
        full = full_trace(raw, path, tdir)
        return cls(raw, path, tdir, full, cut_windows(full, days, min_jobs))

    @classmethod
    def load(cls, scenario: str | Path, traces: str | Path | None = None, days: float = 7.0, min_jobs: int = 200):
        path = find_scenario(scenario)
        return cls.from_raw(yaml.safe_load(path.read_text()), path, traces, days, min_jobs)

    def at(self, w: Window, load: float) -> Scenario:
        return scenario_at_load(self.raw, self.path, self.traces, self.trace, w, load)


def replay_window(sc: Scenario, policies: Sequence[str]) -> dict[str, dict]:
    """Each policy's figures on one sized window."""
    runs = {pol: run_policy(sc, pol) for pol in policies}
    out: dict[str, dict] = {}
    for pol, res in runs.items():
        s = summarize(res, sc.scheduler.aging_interval)
        row = {
            "gpu_hours_lost": s["gpu_hours_lost"],
            "overtaken": s["low_priority_overtaken"],
            "avg_jct_h": (s["avg_jct_s"] or 0.0) / 3600.0,
            "utilization": s["utilization"],
            "rejected": s["rejected"],
            "cost_per_job": s["cost_per_job"],
        }
        for ref in REFERENCES:
            if ref in runs:
                row[f"jct/{ref}"] = compare_on_common_jobs(res, runs[ref]).get("avg_jct_s")
        out[pol] = row
    # what a job costs against fifo on the scenario's own pools (what any fixed-pool policy pays,
    # static's included): the figure `spot-hybrid`, on its own pools, is for
    fifo_cost = out.get("fifo", {}).get("cost_per_job")
    for row in out.values():
        c = row["cost_per_job"]
        row["cost/job/fifo"] = c / fifo_cost if c is not None and fifo_cost else None
    return out


def _cell(values: list[float], fmt: str = "{:.2f}") -> str:
    v = [x for x in values if x is not None]
    if not v:
        return "-"
    return f"{fmt.format(statistics.median(v))} [{fmt.format(max(v))}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jupyter_gpusched.sim.loadsweep", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario")
    p.add_argument(
        "--loads", default=",".join(str(x) for x in DEFAULT_LOADS), help="offered loads (default 0.6,0.8,0.95)"
    )
    p.add_argument("--days", type=float, default=7.0, help="window length in days (default 7)")
    p.add_argument("--min-jobs", type=int, default=200, help="drop windows with fewer jobs (default 200)")
    p.add_argument("--windows", type=int, help="replay only the first N chosen windows")
    p.add_argument("--dev", action="store_true", help="replay the development (even) windows, not the held-out ones")
    p.add_argument("--policies", help="comma-separated (default: the scenario's, less static)")
    p.add_argument("--plot", help="write a PNG of JCT/srpt, GPU-hours lost and cost per job against load here")
    p.add_argument("--json", help="write every window's figures here")
    p.add_argument("--estimates", choices=ESTIMATES, help="the jobs' runtime estimates (default: the scenario's)")
    p.add_argument(
        "--short-first", choices=("on", "off"), help="scheduler.short_first for every window (default: the scenario's)"
    )
    p.add_argument(
        "--baselines-preempt",
        choices=("any", "preemptible"),
        default="any",
        help="which jobs tiresias and srpt may preempt: any (as published, the default) or only preemptible ones",
    )
    p.add_argument("--traces")
    args = p.parse_args(argv)
    try:
        path = find_scenario(args.scenario)
        raw = override(
            yaml.safe_load(path.read_text()), args.estimates, {"on": True, "off": False}.get(args.short_first)
        )
        if args.baselines_preempt == "preemptible":
            opts = raw.setdefault("policy_options", {})
            for pol in ("tiresias", "srpt"):
                opts.setdefault(pol, {})["only_preemptible"] = True
        sweep = LoadSweep.from_raw(raw, path, args.traces, args.days, args.min_jobs)
        full, wins = sweep.trace, sweep.windows
        loads = [float(x) for x in args.loads.split(",")]
        base = scenario_from_dict(raw, where=str(path), base=path.parent, traces=sweep.traces, path=path)
    except (ScenarioError, TraceError, KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if any(not 0 < x for x in loads):
        print("error: loads must be positive", file=sys.stderr)
        return 2
    policies = (
        [x.strip() for x in args.policies.split(",")] if args.policies else [x for x in base.policies if x != "static"]
    )
    chosen = [w for w in wins if w.held_out != args.dev]
    if args.windows is not None:
        chosen = chosen[: args.windows]
    kind = "development" if args.dev else "held-out"
    print(
        f"{args.scenario}: {len(wins)} windows of {args.days:g} days with >= {args.min_jobs} jobs; "
        f"replaying the {len(chosen)} {kind} ones ({', '.join(w.label(full) for w in chosen)})"
    )
    if args.baselines_preempt == "preemptible":
        print("tiresias and srpt preempt only jobs marked preemptible (--baselines-preempt preemptible)")
    if not chosen:
        return 1
    t0 = time.perf_counter()
    table: dict[float, dict[str, dict[str, list]]] = {}
    reached: dict[float, list[float]] = {}
    stretches: dict[float, list[float]] = {}
    for load in loads:
        rows = table[load] = {pol: {} for pol in policies}
        for w in chosen:
            try:
                sc = sweep.at(w, load)
            except ScenarioError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            hours = sc.notes["loadsweep"]["hours"]
            reached.setdefault(load, []).append(offered_load(sc.trace.jobs, sc.capacity, hours))
            stretches.setdefault(load, []).append(sc.notes["loadsweep"]["stretch"])
            figs = replay_window(sc, policies)
            for pol, row in figs.items():
                for k, v in row.items():
                    rows[pol].setdefault(k, []).append(v)
            print(
                f"  load {load:g} window {w.label(full)}: {w.jobs} jobs on {sc.capacity} GPUs "
                f"({time.perf_counter() - t0:.0f} s)",
                file=sys.stderr,
            )
    for load in loads:
        got, st = reached[load], stretches[load]
        print(
            f"\noffered load {load:g} (reached {min(got):.3f}-{max(got):.3f}; arrivals stretched x{min(st):.2f}-"
            f"{max(st):.2f} after rounding to whole nodes); median [worst] over {len(chosen)} {kind} windows"
        )
        header = (
            f"{'policy':<12} {'JCT/tiresias':>14} {'JCT/srpt':>14} {'JCT/fifo':>14} "
            f"{'GPU-h lost':>16} {'low overtaken':>16} {'cost/job/fifo':>14}"
        )
        print(header)
        print("-" * len(header))
        for pol in policies:
            d = table[load][pol]
            ov = d.get("overtaken", [])
            print(
                f"{pol:<12} {_cell(d.get('jct/tiresias', [])):>14} {_cell(d.get('jct/srpt', [])):>14} "
                f"{_cell(d.get('jct/fifo', [])):>14} {_cell(d.get('gpu_hours_lost', []), '{:.1f}'):>16} "
                f"{f'{sum(ov)} in {sum(1 for x in ov if x)} win':>16} {_cell(d.get('cost/job/fifo', [])):>14}"
            )
    print(
        f"\n{len(loads) * len(chosen)} windows x {len(policies)} policies replayed in {time.perf_counter() - t0:.0f} s"
    )
    if args.json:
        doc = {
            "scenario": args.scenario,
            "days": args.days,
            "windows": [w.label(full) for w in chosen],
            "held_out": not args.dev,
            "by_load": {
                str(load): {"reached": reached[load], "stretch": stretches[load], "policies": table[load]}
                for load in loads
            },
        }
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.plot:
        plot(table, policies, Path(args.plot), f"{args.scenario}, {len(chosen)} {kind} windows of {args.days:g} days")
        print(f"plot: {args.plot}")
    return 0


def plot(table: dict[float, dict[str, dict[str, list]]], policies: Sequence[str], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    loads = sorted(table)
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4))
    for pol in policies:
        # the median over windows (solid) hides the window a policy does badly in: the worst too (dashed)
        (line,) = a.plot([], [], marker="o", label=pol)
        for ax, key in ((a, "jct/srpt"), (b, "gpu_hours_lost"), (c, "cost/job/fifo")):
            vals = [[x for x in table[L][pol].get(key, []) if x is not None] for L in loads]
            ax.plot(loads, [statistics.median(v) if v else math.nan for v in vals], marker="o", color=line.get_color())
            ax.plot(loads, [max(v) if v else math.nan for v in vals], ls="--", color=line.get_color(), alpha=0.7)
    a.set_xlabel("offered load")
    a.set_ylabel("avg JCT / srpt oracle (solid: median, dashed: worst)")
    a.axhline(1.0, color="grey", lw=0.5)
    low, high = a.get_ylim()
    if high > 5 * max(low, 1.0):  # one far-off policy would flatten the others: a log axis, read as plain ratios
        a.set_yscale("log")
        a.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}x"))
        a.yaxis.set_minor_formatter(NullFormatter())
    b.set_xlabel("offered load")
    b.set_ylabel("GPU-hours lost (solid: median, dashed: worst)")
    c.set_xlabel("offered load")
    c.set_ylabel("cost per job / fifo's (solid: median, dashed: worst)")
    c.axhline(1.0, color="grey", lw=0.5)
    c.set_ylim(bottom=0)
    a.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
