"""Choosing a window of a trace that loads a small cluster, and checking a result over
every such window rather than one.

    python -m jupyter_gpusched.sim.windows seed-3x8            # list the candidate windows
    python -m jupyter_gpusched.sim.windows seed-3x8 --sweep    # every policy on each of them
    python -m jupyter_gpusched.sim.windows seed-3x8 --sweep --estimates learned   # with learned runtimes

A candidate is a `hours`-long window starting on a `step_h` boundary and a set of `k`
tenants (from the scenario's tenant list, or all tenants of the trace) such that, counting
only jobs of at most `max_gpus` GPUs, the offered work is between `load_min` and
`load_max` times the cluster's GPU-hours in the window and no job is longer than the
window. The scenario's own window is the candidate whose load is closest to 1.0 (ties:
more jobs) -- a rule on the trace alone, fixed before any policy is run.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import math
import statistics
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import yaml

from .config import ESTIMATES
from .metrics import compare_on_common_jobs, summarize
from .report import run_policy
from .scenario import Scenario, ScenarioError, find_scenario, override, scenario_from_dict, traces_dir
from .traces import Trace, TraceError, load_trace


@dataclass(frozen=True)
class Window:
    start: float  # seconds since the trace origin
    end: float
    tenants: tuple[str, ...]
    jobs: int
    load: float
    longest_h: float

    def label(self, trace: Trace) -> str:
        if trace.origin is None:
            return f"{self.start:.0f}s + {(self.end - self.start) / 3600:.0f}h"
        return (trace.origin + timedelta(seconds=self.start)).strftime("%Y-%m-%d %H:%M")


def candidate_windows(
    trace: Trace,
    capacity: int,
    *,
    tenants: list[str] | None = None,
    k: int = 4,
    hours: float = 24.0,
    step_h: float = 6.0,
    max_gpus: int | None = None,
    load_min: float = 0.8,
    load_max: float = 1.2,
) -> list[Window]:
    jobs = [j for j in trace.jobs if max_gpus is None or j.gpus <= max_gpus]
    if not jobs:
        return []
    pool = sorted(set(tenants) if tenants else {j.tenant for j in jobs})
    length = hours * 3600.0
    step = step_h * 3600.0
    # windows start on wall-clock multiples of the step (00:00, 06:00, ...) where the trace has a clock
    shift = 0.0
    if trace.origin is not None:
        o = trace.origin
        shift = o.hour * 3600 + o.minute * 60 + o.second + o.microsecond / 1e6
    first = math.floor((jobs[0].submit + shift) / step) * step - shift
    last = jobs[-1].submit
    out = []
    start = first
    i0 = 0
    while start <= last:
        end = start + length
        while i0 < len(jobs) and jobs[i0].submit < start:
            i0 += 1
        per: dict[str, list[float]] = {}
        i = i0
        while i < len(jobs) and jobs[i].submit < end:
            j = jobs[i]
            if j.tenant in pool:
                acc = per.setdefault(j.tenant, [0.0, 0, 0.0])
                acc[0] += j.duration * j.gpus
                acc[1] += 1
                acc[2] = max(acc[2], j.duration)
            i += 1
        for combo in itertools.combinations(sorted(per), k):
            work = sum(per[t][0] for t in combo)
            load = work / (capacity * length)
            longest = max(per[t][2] for t in combo)
            if load_min <= load <= load_max and longest <= length:
                out.append(Window(start, end, combo, int(sum(per[t][1] for t in combo)), load, longest / 3600))
        start += step
    return out


def chosen(windows: list[Window]) -> Window | None:
    """The rule: load closest to 1.0, then more jobs, then earlier."""
    return min(windows, key=lambda w: (abs(w.load - 1.0), -w.jobs, w.start, w.tenants), default=None)


def _tenant_terms(listed: list[dict], names: tuple[str, ...]) -> list[dict]:
    """The window's tenants on the scenario's terms: their own entry where listed, else the
    terms all listed tenants share (seed-3x8: quota 6 each)."""
    by_name = {str(t["name"]): t for t in listed}
    shared = [{k: v for k, v in t.items() if k != "name"} for t in listed]
    common = shared[0] if shared and all(x == shared[0] for x in shared) else None
    out = []
    for n in names:
        if n in by_name:
            out.append(by_name[n])
        elif common is not None:
            out.append({"name": n, **common})
    return out


@dataclass(frozen=True)
class Sweep:
    """A scenario, its whole trace, and how to make the scenario of one of its windows."""

    raw: dict
    path: Path
    traces: Path | None
    trace: Trace
    scenario: Scenario

    @classmethod
    def load(cls, name: str, traces: str | None = None) -> Sweep:
        path = find_scenario(name)
        raw = yaml.safe_load(path.read_text())
        base = path.parent
        tdir = traces_dir(base, traces)
        tv = raw["trace"]
        tpath = tv["path"].replace("${traces}", str(tdir)) if tdir else tv["path"]
        full = load_trace(tv["format"], tpath if tpath.startswith("/") else base / tpath)
        sc = scenario_from_dict(raw, where=str(path), base=base, traces=tdir, path=path)
        return cls(raw, path, tdir, full, sc)

    def window(self, w: Window, estimates: str | None = None, short_first: bool | None = None) -> Scenario:
        """The scenario on window `w` (its tenants on the scenario's terms); `estimates` overrides
        jobs.estimates and `short_first` scheduler.short_first."""
        r2 = copy.deepcopy(self.raw)
        origin = self.trace.origin
        r2["trace"]["window"] = (
            {"start": w.start, "end": w.end}
            if origin is None
            else {
                "start": (origin + timedelta(seconds=w.start)).isoformat(sep=" "),
                "end": (origin + timedelta(seconds=w.end)).isoformat(sep=" "),
            }
        )
        r2["trace"]["tenants"] = list(w.tenants)
        r2["tenants"] = _tenant_terms(self.raw.get("tenants") or [], w.tenants)
        override(r2, estimates, short_first)
        return scenario_from_dict(r2, where=str(self.path), base=self.path.parent, traces=self.traces, path=self.path)

    def candidates(self, **kw) -> list[Window]:
        """candidate_windows on the scenario's cluster, tenants and max_gpus (keywords override)."""
        args = dict(tenants=list(self.scenario.tenant_terms) or None, max_gpus=self.raw["trace"].get("max_gpus"))
        args.update(kw)
        return candidate_windows(self.trace, self.scenario.capacity, **args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jupyter_gpusched.sim.windows", description=__doc__.split("\n\n")[0])
    p.add_argument("scenario")
    p.add_argument("--sweep", action="store_true", help="run the scenario's policies on every candidate window")
    p.add_argument("--policies", help="comma-separated policies for --sweep (default: the scenario's)")
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--step-h", type=float, default=6.0)
    p.add_argument("--k", type=int, default=4, help="tenants per window")
    p.add_argument("--load-min", type=float, default=0.8)
    p.add_argument("--load-max", type=float, default=1.2)
    p.add_argument("--tenants", help="comma-separated tenants to draw from (default: the scenario's tenant list)")
    p.add_argument("--traces")
    p.add_argument(
        "--estimates", choices=ESTIMATES, help="the jobs' runtime estimates (default: the scenario's jobs.estimates)"
    )
    args = p.parse_args(argv)
    try:
        sw = Sweep.load(args.scenario, args.traces)
    except (ScenarioError, TraceError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    full, sc, tv = sw.trace, sw.scenario, sw.raw["trace"]
    capacity = sc.capacity
    candidates_from = [t.strip() for t in args.tenants.split(",")] if args.tenants else (list(sc.tenant_terms) or None)
    wins = candidate_windows(
        full,
        capacity,
        tenants=candidates_from,
        k=args.k,
        hours=args.hours,
        step_h=args.step_h,
        max_gpus=tv.get("max_gpus"),
        load_min=args.load_min,
        load_max=args.load_max,
    )
    pick = chosen(wins)
    print(
        f"{len(wins)} candidate windows ({args.hours:g} h, step {args.step_h:g} h, {args.k} tenants, "
        f"load {args.load_min}-{args.load_max} of {capacity} GPUs, no job longer than the window)"
    )
    if not args.sweep:
        for w in sorted(wins, key=lambda w: (abs(w.load - 1.0), -w.jobs)):
            mark = "  <- chosen" if w is pick else ""
            print(
                f"  {w.label(full)}  {','.join(w.tenants):<32} {w.jobs:5d} jobs  load {w.load:.2f}  longest {w.longest_h:5.1f} h{mark}"
            )
        return 0
    policies = [x.strip() for x in args.policies.split(",")] if args.policies else sc.policies
    if "static" not in policies:
        policies = ["static", *policies]
    rows: dict[str, dict[str, list[float]]] = {pol: {} for pol in policies}
    for n, w in enumerate(wins, 1):
        wsc = sw.window(w, args.estimates)
        runs = {pol: run_policy(wsc, pol) for pol in policies}
        sums = {pol: summarize(res, wsc.scheduler.aging_interval) for pol, res in runs.items()}
        st = sums["static"]
        for pol, s in sums.items():
            d = rows[pol]
            d.setdefault("util/static", []).append(s["utilization"] / st["utilization"])
            # JCT on the jobs both completed (static rejects jobs larger than a partition)
            d.setdefault("jct/static", []).append(compare_on_common_jobs(runs[pol], runs["static"])["avg_jct_s"])
            d.setdefault("cost/static", []).append(s["cost_per_job"] / st["cost_per_job"])
            if "srpt" in runs:
                d.setdefault("jct/oracle", []).append(compare_on_common_jobs(runs[pol], runs["srpt"])["avg_jct_s"])
            d.setdefault("overtaken", []).append(s["low_priority_overtaken"])
        print(f"  [{n}/{len(wins)}] {w.label(full)} {','.join(w.tenants)}", file=sys.stderr)
    print(f"\nmedian [min - max] over the {len(wins)} windows; 'met' counts windows meeting the seed-3x8 target")
    header = f"{'policy':<12} {'util/static':>22} {'JCT/static':>22} {'cost/job vs static':>22} {'JCT/oracle':>22} {'low overtaken':>14}"
    print(header)
    print("-" * len(header))
    targets = {
        "util/static": (lambda x: x >= 2.0),
        "jct/static": (lambda x: x <= 0.6),
        "cost/static": (lambda x: x <= 0.5),
        "jct/oracle": (lambda x: x <= 1.5),
    }
    for pol, d in rows.items():
        cells = []
        for key in ("util/static", "jct/static", "cost/static", "jct/oracle"):
            v = d.get(key, [])
            if not v:
                cells.append(f"{'-':>22}")
                continue
            met = sum(targets[key](x) for x in v)
            cells.append(f"{statistics.median(v):5.2f} [{min(v):.2f}-{max(v):.2f}] {met:2d}/{len(v)}".rjust(22))
        ov = d.get("overtaken", [])
        cells.append(f"{sum(1 for x in ov if x):>3d} windows".rjust(14))
        print(f"{pol:<12} " + " ".join(cells))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
