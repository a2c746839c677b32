"""`jupyter gpusched bench SCENARIO`: replay a scenario under every policy, side by side.

Prints one table (rows = policies, columns = metrics, with ratios vs `static` and vs the
`srpt` oracle) and the lower bounds beside it; optionally writes every figure as JSON and
PNG plots (utilisation over time, JCT CDF, queue length over time).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..core.policies import policy_names
from .engine import Simulation
from .metrics import bounds, check_bounds, compare_on_common_jobs, summarize
from .results import SimResult
from .scenario import Scenario, ScenarioError, builtin_scenarios, load_scenario
from .traces import TraceError

__all__ = ["bench_main", "format_table", "run_bench", "write_plots"]

BASELINE = "static"
ORACLE = "srpt"
RATIO_KEYS = ("utilization", "avg_jct_s", "p99_jct_s", "makespan_s", "cost_per_job")


def run_policy(
    sc: Scenario,
    policy: str,
    progress: Callable[[int], None] | None = None,
    simulation: type[Simulation] = Simulation,
    **kw,
) -> SimResult:
    """Replay `sc` under `policy` (with `simulation`, a Simulation subclass that observes the replay, if given)."""
    sim = simulation(
        sc.jobs,
        sc.pools_of(policy),
        sc.tenants_for(policy),
        sc.make_policy(policy),
        seed=sc.seed,
        config=sc.scheduler,
        checkpoint=sc.checkpoint,
        estimates=sc.estimates,
        progress=progress,
        budgets=sc.budgets,
        **kw,
    )
    res = sim.run()
    res.policy = policy
    return res


def _ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def run_bench(
    sc: Scenario, policies: Sequence[str] | None = None, *, progress: bool | None = None, check_invariants: bool = False
) -> tuple[dict, dict[str, SimResult]]:
    """Run every policy; return (the JSON-ready report, the raw results for plots)."""
    policies = list(policies or sc.policies)
    results: dict[str, SimResult] = {}
    summaries: dict[str, dict] = {}
    tqdm: Any = None
    if progress is not False:
        try:
            import tqdm as tqdm_module

            tqdm = tqdm_module.tqdm
        except ImportError:  # pragma: no cover - tqdm is a dependency of the sim extra
            tqdm = None
    for pol in policies:
        bar = None
        if tqdm is not None:
            bar = tqdm(
                total=len(sc.jobs),
                desc=f"{pol:>11}",
                unit="job",
                file=sys.stderr,
                disable=None if progress is None else not progress,
                leave=True,
                dynamic_ncols=True,
            )
        try:
            res = run_policy(
                sc, pol, progress=bar.update if bar is not None else None, check_invariants=check_invariants
            )
        finally:
            if bar is not None:
                bar.close()
        results[pol] = res
        summaries[pol] = summarize(res, sc.scheduler.aging_interval)
    for pol, s in summaries.items():
        for ref, key in ((BASELINE, "vs_static"), (ORACLE, "vs_oracle")):
            if ref in summaries:
                ratios = {k: _ratio(s.get(k), summaries[ref].get(k)) for k in RATIO_KEYS}
                # JCT ratios on the jobs both completed; the rest flagged when the sets differ
                common = compare_on_common_jobs(results[pol], results[ref])
                ratios["avg_jct_s"] = common.get("avg_jct_s")
                ratios["p99_jct_s"] = common.get("p99_jct_s")
                ratios["common_jobs"] = common["jobs"]
                ratios["job_sets_differ"] = common["job_sets_differ"]
                ratios["only_this"], ratios["only_ref"] = common["only_this"], common["only_ref"]
                s[key] = ratios
        s["bound_violations"] = check_bounds(s)
    capacity = max(r.capacity_max for r in results.values()) if results else sc.capacity
    all_jobs = next(iter(results.values())).jobs if results else []
    gb = bounds(all_jobs, capacity)
    report = {
        "scenario": {
            "name": sc.name,
            "description": sc.description,
            "file": str(sc.path) if sc.path else None,
            "trace": {
                "format": sc.trace.format,
                "source": sc.trace.source,
                "jobs": len(sc.jobs),
                "left_out": sc.trace.skipped,
            },
            "window_start": (sc.trace.origin.isoformat() if sc.trace.origin else None),
            "first_submit_s": min((j.trace.submit for j in sc.jobs), default=None),
            "last_submit_s": max((j.trace.submit for j in sc.jobs), default=None),
            "capacity_gpus": sc.capacity,
            "pools": {p: [_pool_json(pc) for pc in sc.pools_of(p)] for p in policies},
            "tenants": {
                p: [{"name": t.name, "quota": t.quota, "burst": t.burst} for t in sc.tenants_for(p)]
                for p in policies[:1]
            },
            "checkpoint": {
                "interval_s": sc.checkpoint.interval_s,
                "cost_s": sc.checkpoint.cost_s,
                "restore_s": sc.checkpoint.restore_s,
                "applies_to": sc.checkpoint.applies_to,
            },
            "estimates": sc.estimates,
            "aging_interval_s": sc.scheduler.aging_interval,
            "seed": sc.seed,
            "priorities": _count(j.priority.label for j in sc.jobs),
            "preemptible_jobs": sum(j.preemptible for j in sc.jobs),
        },
        "policies": summaries,
        "bounds": {
            "makespan_s": gb["makespan_s"],
            "avg_jct_s": gb["avg_jct_s"],
            "goodput_max": gb.get("goodput_max"),
            "work_gpu_hours": gb.get("work_gpu_hours"),
            "capacity_gpus": gb["capacity_gpus"],
            "jobs": gb["jobs"],
            "note": "for the whole job set on the largest cluster any policy had; each policy's own bounds "
            "(over the jobs it completed) are under policies.<name>.bounds",
        },
    }
    return report, results


def _pool_json(pc) -> dict:
    d = {
        "name": pc.name,
        "nodes": len(pc.nodes),
        "gpus": pc.gpus,
        "price_per_gpu_hour": pc.price_per_gpu_hour,
        "spot": pc.spot,
    }
    if pc.lifetime is not None:
        lt = pc.lifetime
        d["lifetime"] = {"distribution": lt.distribution, "mean_s": lt.mean_s, "min_s": lt.min_s, "max_s": lt.max_s}
        d["replace_after_s"] = pc.replace_after_s
    return d


def _count(items) -> dict:
    out: dict = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


# --- the table ------------------------------------------------------------------------------------
def _h(x) -> str:
    return "-" if x is None else f"{x / 3600:.2f}"


def _pc(x) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _x(x) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def _money(x) -> str:
    return "-" if x is None else (f"${x:,.2f}" if abs(x) < 1e4 else f"${x:,.0f}")


def _f(x, d=2) -> str:
    return "-" if x is None else f"{x:.{d}f}"


def _grid(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths, strict=True)))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    return "\n".join(out)


def _fitted_grid(
    header: Sequence[str], rows: Sequence[Sequence[str]], priority: Sequence[str], width: int | None
) -> tuple[str, list[str]]:
    """The grid with as many columns as fit in `width` characters (None: all), dropping the columns last in
    `priority` first (columns not named there go first); returns it and the names left out."""
    keep = list(range(len(header)))
    rank = {name: i for i, name in enumerate(priority)}
    dropped: list[str] = []

    def text() -> str:
        return _grid([header[i] for i in keep], [[r[i] for i in keep] for r in rows])

    while width is not None and len(keep) > 2 and max(len(line) for line in text().splitlines()) > width:
        worst = max(keep[1:], key=lambda i: rank.get(header[i], len(priority)))
        keep.remove(worst)
        dropped.append(header[worst])
    return text(), dropped


# The main table's columns, most telling first: what a narrow terminal still shows.
MAIN_COLUMNS_BY_PRIORITY = (
    "policy", "jobs", "util", "avgJCT h", "JCT/static", "cost/job", "GPUh lost", "p99JCT h", "makespan h",
    "goodput", "preempt", "JCT/oracle", "maxLowWait h", "util net", "p50JCT h", "Jain", "util/static", "cost/static",
)  # fmt: skip
WAIT_COLUMNS_BY_PRIORITY = (
    "policy", "avg high", "avg low", "max low", "low overtaken", "avg normal", "max high", "max normal",
    "cost total", "of it spot",
)  # fmt: skip


def _size_classes(pols: dict) -> list[str]:
    """The job-size classes (metrics.size_class) any policy saw, smallest first."""
    return sorted({k for s in pols.values() for k in s["wait_by_size"]}, key=lambda k: int(k.split("-")[-1]))


def format_table(report: dict, width: int | None = None) -> str:
    """The report as text; tables fit in `width` columns (None: every column, however wide)."""
    sc = report["scenario"]
    pols = report["policies"]
    head = [
        f"scenario {sc['name']}: {sc['trace']['jobs']} jobs from {sc['trace']['format']} "
        f"({Path(sc['trace']['source']).name}), {sc['capacity_gpus']} GPUs, seed {sc['seed']}",
    ]
    if left_out := sc["trace"].get("left_out"):
        said = "left out of the trace: " + "; ".join(f"{why}: {n:,}" for why, n in left_out.items())
        head += textwrap.wrap(said, min(width or 118, 118))
    header = [
        "policy", "jobs", "util", "util net", "goodput", "avgJCT h", "p50JCT h", "p99JCT h", "makespan h",
        "maxLowWait h", "cost/job", "Jain", "preempt", "GPUh lost",
        "JCT/static", "JCT/oracle", "util/static", "cost/static",
    ]  # fmt: skip
    rows = []
    flagged = []
    for name, s in pols.items():
        vs = s.get("vs_static", {})
        vo = s.get("vs_oracle", {})
        mark = "*" if vs.get("job_sets_differ") else ""
        if mark:
            flagged.append(f"{name} {vs['common_jobs']} (static {vs['only_ref']}, {name} {vs['only_this']} alone)")
        rows.append(
            [
                name,
                str(s["jobs"]) + (f" ({s['rejected']} rej)" if s["rejected"] else ""),
                _pc(s["utilization"]),
                _pc(s.get("utilization_net")),
                _pc(s["goodput"]),
                _h(s["avg_jct_s"]),
                _h(s["p50_jct_s"]),
                _h(s["p99_jct_s"]),
                _h(s["makespan_s"]),
                _h(s["max_low_priority_wait_s"]),
                _money(s["cost_per_job"]),
                _f(s["jain_fairness"]),
                str(s["preemptions"] + s["interruptions"]),
                _f(s["gpu_hours_lost"], 1),
                _x(vs.get("avg_jct_s")) + mark,
                _x(vo.get("avg_jct_s")) + ("*" if vo.get("job_sets_differ") else ""),
                _x(vs.get("utilization")) + mark,
                _x(vs.get("cost_per_job")) + mark,
            ]
        )
    b = report["bounds"]
    legend = (
        "util: GPUs allocated / provisioned over the run (util net: less checkpoint writes and restores); "
        "goodput: completed work / provisioned; JCT: submit to end; "
        "maxLowWait: longest wait of a low-priority job; cost/job: provisioned GPU-hours x price / completed jobs; "
        "preempt: preemptions + spot interruptions; GPUh lost: work thrown away by them; x/static, x/oracle: ratios "
        "to static and to the srpt oracle (knows every runtime); JCT ratios are over the jobs both completed"
    )
    wrap = min(width or 118, 118)
    grid, left_out = _fitted_grid(header, rows, MAIN_COLUMNS_BY_PRIORITY, width)
    lines = head + ["", grid, *textwrap.wrap(legend, wrap)]
    if left_out:
        lines += textwrap.wrap(f"(left out to fit {width} columns: {', '.join(left_out)}; --wide shows all)", wrap)
    lines.append("")
    if flagged:
        note = (
            "* the job sets differ (a policy rejected or did not finish some jobs): JCT/static compares only the "
            "jobs both completed -- " + "; ".join(flagged) + "; util/static and cost/static cover different jobs"
        )
        lines += [*textwrap.wrap(note, wrap), ""]
    lines += textwrap.wrap(
        f"lower bounds ({b['jobs']} jobs that must complete, {b['capacity_gpus']} GPUs): "
        f"makespan >= {_h(b['makespan_s'])} h, avg JCT >= {_h(b['avg_jct_s'])} h; "
        f"on a fixed cluster of that size goodput <= {_pc(b.get('goodput_max'))}",
        wrap,
    )
    bad = {n: s["bound_violations"] for n, s in pols.items() if s.get("bound_violations")}
    lines.append("bounds hold for every policy" if not bad else f"BOUND VIOLATIONS: {bad}")
    # waits per priority class
    prios = ["high", "normal", "low"]
    wrows = []
    for name, s in pols.items():
        w = s["wait_by_priority"]
        wrows.append(
            [name]
            + [_h(w[p]["avg_s"]) if p in w else "-" for p in prios]
            + [_h(w[p]["max_s"]) if p in w else "-" for p in prios]
            + [str(s["low_priority_overtaken"]), _money(s["cost_total"]), _money(s["cost_spot"])]
        )
    wait_header = [
        "policy", "avg high", "avg normal", "avg low", "max high", "max normal", "max low", "low overtaken",
        "cost total", "of it spot",
    ]  # fmt: skip
    wait_grid, wait_left_out = _fitted_grid(wait_header, wrows, WAIT_COLUMNS_BY_PRIORITY, width)
    lines += [
        "",
        f"queueing delay by priority (hours; aging bound for low priority: {_h(next(iter(pols.values()))['aging_bound_s'])} h)",
        wait_grid,
    ]
    if wait_left_out:
        lines += textwrap.wrap(f"(left out: {', '.join(wait_left_out)}; --wide shows all)", wrap)
    sizes = _size_classes(pols)
    if len(sizes) > 1:
        srows = [
            [name] + [f"{_h(w['avg_s'])} / {_h(w['max_s'])}" if (w := s["wait_by_size"].get(k)) else "-" for k in sizes]
            for name, s in pols.items()
        ]
        heads = ["policy", *(f"{k} GPU" if k == "1" else k for k in sizes)]
        # too narrow a terminal keeps the largest jobs and the smallest, which say the most
        size_grid, size_left_out = _fitted_grid(heads, srows, [heads[0], heads[-1], heads[1], *heads[-2:1:-1]], width)
        lines += ["", "queueing delay by job size in GPUs (hours, average / longest)", size_grid]
        if size_left_out:
            lines += textwrap.wrap(f"(left out: {', '.join(size_left_out)}; --wide shows all)", wrap)
    tenants = sorted({t for s in pols.values() for t in s["wait_by_tenant"]})
    if 0 < len(tenants) <= 8:
        trows = [
            [name] + [_h(s["wait_by_tenant"].get(t, {}).get("avg_s")) for t in tenants] for name, s in pols.items()
        ]
        lines += ["", "average queueing delay by tenant (hours)", _grid(["policy", *tenants], trows)]
    lines += [""]
    for name, s in pols.items():
        extra = f", {s['rejected']} rejected at submit" if s["rejected"] else ""
        extra += f", {s['unfinished']} UNFINISHED (run stuck)" if s["unfinished"] else ""
        lines.append(
            f"{name}: {s['events']:,} events, {s['scheduler_passes']:,} scheduler passes in {s['wall_s']:.1f} s "
            f"({s['events_per_s']:,.0f} events/s){extra}"
        )
    return "\n".join(lines)


# --- plots ----------------------------------------------------------------------------------------
def _binned(t: np.ndarray, v: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean of a step function (value v[i] from t[i] to t[i+1]) per bin."""
    if t.size == 0:
        return np.zeros(len(edges) - 1)
    cum = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])
    at = np.interp(edges, t, cum, left=0.0, right=cum[-1])
    widths = np.diff(edges)
    return np.diff(at) / np.where(widths > 0, widths, 1)


def write_plots(report: dict, results: dict[str, SimResult], out_dir: str | Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    name = report["scenario"]["name"]
    t0 = min(r.start for r in results.values())
    t1 = max(r.end for r in results.values())
    edges = np.linspace(t0, t1, 301) if t1 > t0 else np.array([t0, t0 + 1])
    mid_h = (edges[:-1] + edges[1:]) / 2 / 3600 - t0 / 3600
    paths = []

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for pol, r in results.items():
        t = np.asarray(r.series_t)
        if t.size < 2:
            continue
        a = _binned(t, np.asarray(r.series_alloc), edges)
        c = _binned(t, np.asarray(r.series_capacity), edges)
        ax.plot(mid_h, np.where(c > 0, a / np.where(c > 0, c, 1), 0) * 100, label=pol, lw=1.2)
    ax.set(
        xlabel="hours since first submit",
        ylabel="GPUs allocated (%)",
        title=f"{name}: utilisation over time",
        ylim=(0, 105),
    )
    ax.legend(ncol=4, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "utilization.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for pol, r in results.items():
        jct = np.sort([j.jct for j in r.jobs if j.state in ("SUCCEEDED", "FAILED") and j.jct is not None])
        if jct.size:
            ax.step(np.maximum(jct, 1) / 3600, np.arange(1, jct.size + 1) / jct.size, where="post", label=pol, lw=1.2)
    ax.set(xscale="log", xlabel="job completion time (hours, log)", ylabel="fraction of jobs", title=f"{name}: JCT CDF")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    paths.append(out / "jct_cdf.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for pol, r in results.items():
        t = np.asarray(r.series_t)
        if t.size < 2:
            continue
        ax.plot(mid_h, _binned(t, np.asarray(r.series_queued), edges), label=pol, lw=1.2)
    ax.set(xlabel="hours since first submit", ylabel="jobs waiting", title=f"{name}: queue length over time")
    ax.legend(ncol=4, fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    paths.append(out / "queue_length.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    # where whole nodes must drain for large jobs, their waits differ from small ones' by orders of magnitude
    pols = report["policies"]
    sizes = _size_classes(pols)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.8 / max(len(pols), 1)
    for i, (pol, s) in enumerate(pols.items()):
        x = np.arange(len(sizes)) + (i - (len(pols) - 1) / 2) * width
        w = [s["wait_by_size"].get(k) for k in sizes]
        avg = [v["avg_s"] / 3600 if v else np.nan for v in w]
        longest = [v["max_s"] / 3600 if v else np.nan for v in w]
        bars = ax.bar(x, avg, width, label=pol)
        ax.plot(x, longest, "_", ms=8, mew=1.5, color=bars.patches[0].get_facecolor() if bars.patches else None)
    ax.set_xticks(np.arange(len(sizes)), [f"{k} GPU" if k == "1" else f"{k} GPUs" for k in sizes])
    ax.set_yscale("symlog", linthresh=1)
    ax.set(
        xlabel="job size",
        ylabel="hours waited (log above 1 h)",
        title=f"{name}: queueing delay by job size (bars: average; dashes: longest)",
    )
    top = max((v["max_s"] for s in pols.values() for v in s["wait_by_size"].values()), default=0) / 3600
    ax.set_ylim(0, max(top, 1) * 2)  # room above the longest dash
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never over them
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    paths.append(out / "wait_by_size.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


# --- the command ------------------------------------------------------------------------------------
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jupyter gpusched bench",
        description="Replay a GPU-cluster trace through every scheduling policy (the same core code the "
        "service runs) and print them side by side, with the theoretical limits.",
        epilog=f"built-in scenarios: {', '.join(builtin_scenarios()) or 'none found'}; "
        "the scenario YAML schema is in docs/simulator.md",
    )
    p.add_argument("scenario", metavar="SCENARIO", help="a built-in scenario name or a path to a scenario YAML file")
    p.add_argument(
        "--policies",
        help=f"comma-separated policies to compare (default: the scenario's list); known: {', '.join(policy_names())}",
    )
    p.add_argument("--wide", action="store_true", help="every column, however wide (default: fit the terminal)")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE as JSON")
    p.add_argument(
        "--plots", metavar="DIR", help="write PNG plots (utilisation, JCT CDF, queue length, waits by job size) to DIR"
    )
    p.add_argument(
        "--traces", metavar="DIR", help="folder that ${traces} in the scenario stands for (default: ../shared/traces)"
    )
    p.add_argument("--seed", type=int, help="override the scenario's seed")
    p.add_argument("--limit", type=int, metavar="N", help="replay only the first N jobs of the scenario")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--check", action="store_true", help="check engine invariants after every pass (slow)")
    return p


def bench_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        sc = load_scenario(args.scenario, traces=args.traces, seed=args.seed)
        if args.limit is not None:
            if args.limit < 1:
                raise ScenarioError(args.scenario, "--limit must be at least 1")
            sc.jobs = sc.jobs[: args.limit]
            sc.trace = sc.trace.with_jobs([j.trace for j in sc.jobs])
        policies = sc.policies
        if args.policies:
            policies = [p.strip() for p in args.policies.split(",") if p.strip()]
            unknown = [p for p in policies if p not in policy_names()]
            if unknown:
                raise ScenarioError("--policies", f"unknown policy {unknown[0]!r}; known: {', '.join(policy_names())}")
            for p in policies:
                sc.make_policy(p)
    except (ScenarioError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report, results = run_bench(sc, policies, progress=False if args.no_progress else None, check_invariants=args.check)
    print(format_table(report, width=None if args.wide else shutil.get_terminal_size((120, 24)).columns))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2, default=_json_default) + "\n")
        print(f"\nwrote {args.json}")
    if args.plots:
        for written in write_plots(report, results, args.plots):
            print(f"wrote {written}")
    return 0


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, set):
        return sorted(o)
    raise TypeError(f"cannot write {type(o).__name__} as JSON")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(bench_main(sys.argv[1:]))
