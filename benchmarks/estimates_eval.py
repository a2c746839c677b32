"""Learned runtime estimates (core/estimates.py) vs none, replayed on the window sweep's windows.

For each candidate window of a scenario (`python -m jupyter_gpusched.sim.windows SCENARIO` lists
them: 24 h windows on a 6 h step, sets of k tenants, offered load 0.8-1.2), each policy is
replayed twice: `jobs.estimates: none` (today's default: no job has an estimate) and `learned`
(a queued job carries the 80th percentile of the runtimes of jobs like it finished so far, fixed
once it starts; a job's own runtime is never used for itself). `srpt` is the oracle: it reads true
durations either way, so it is there as the reference, not as a user of the estimates.

Split, fixed before any run: windows are ordered by start time; the windows whose start is in
the first half of the distinct start times are DEVELOPMENT, the later ones HELD OUT (no window
start is on both sides). Nothing here was tuned: the estimator's constants (p80, 2 samples,
32 runs per key) were set before the first replay. Each split is reported apart.

Per policy and split it prints: the learned/none ratio of average JCT on the jobs both runs
completed (median [min-max] over windows, and in how many windows learned was better / worse by
more than 1%), GPU-hours lost to preemption (sum over the windows, none -> learned) and aging
violations (low-priority jobs overtaken past the aging bound, sum none -> learned).

    .venv/bin/python benchmarks/estimates_eval.py [SCENARIO] [--policies dynamic,tiresias,srpt,fifo] [--every N] [--tenants A,B,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from jupyter_gpusched.sim.metrics import compare_on_common_jobs, summarize
from jupyter_gpusched.sim.report import run_policy
from jupyter_gpusched.sim.windows import Sweep, Window

POLICIES = "dynamic,tiresias,srpt,fifo"
# The window sweep's tenants for seed-3x8 (benchmarks/RESULTS.md, "all 51 candidate windows").
SEED_TENANTS = "6214e9,7f04ca,11cb48,b436b2,ee9e8c,e13805,6c71a0,2869ce,ed69ec,103959,0e4a51"


def split(wins: list[Window]) -> tuple[list[Window], list[Window]]:
    starts = sorted({w.start for w in wins})
    cut = starts[(len(starts) + 1) // 2] if len(starts) > 1 else float("inf")
    ordered = sorted(wins, key=lambda w: (w.start, w.tenants))
    return [w for w in ordered if w.start < cut], [w for w in ordered if w.start >= cut]


def replay(sw: Sweep, w: Window, policy: str, short_first: bool = False) -> dict:
    # the learned arm orders expected-short jobs first (scheduler.short_first) when asked
    runs = {
        "none": run_policy(sw.window(w, "none", False), policy),
        "learned": run_policy(sw.window(w, "learned", short_first), policy),
    }
    aging = sw.scenario.scheduler.aging_interval
    sums = {est: summarize(res, aging) for est, res in runs.items()}
    return {
        "jct_ratio": compare_on_common_jobs(runs["learned"], runs["none"]).get("avg_jct_s"),
        "avg_jct_h": {est: (s["avg_jct_s"] or 0.0) / 3600 for est, s in sums.items()},
        "lost_gpu_h": {est: s["gpu_hours_lost"] for est, s in sums.items()},
        "aging": {est: s["low_priority_overtaken"] for est, s in sums.items()},
        "unfinished": {est: s["unfinished"] for est, s in sums.items()},
    }


def table(title: str, rows: dict[str, list[dict]]) -> None:
    n = len(next(iter(rows.values()), []))
    print(f"\n{title} ({n} windows)")
    head = (
        f"{'policy':<10} {'JCT learned/none':>26} {'better/worse':>13} "
        f"{'lost GPU-h none -> learned':>27} {'aging viol. none -> learned':>28}"
    )
    print(head)
    print("-" * len(head))
    for pol, rs in rows.items():
        ratios = [r["jct_ratio"] for r in rs if r["jct_ratio"] is not None]
        cell = f"{statistics.median(ratios):.3f} [{min(ratios):.2f}-{max(ratios):.2f}]" if ratios else "-"
        better = sum(x < 0.99 for x in ratios)
        worse = sum(x > 1.01 for x in ratios)
        lost = [sum(r["lost_gpu_h"][e] for r in rs) for e in ("none", "learned")]
        aging = [sum(r["aging"][e] for r in rs) for e in ("none", "learned")]
        print(
            f"{pol:<10} {cell:>26} {f'{better}/{worse}':>13} "
            f"{f'{lost[0]:.1f} -> {lost[1]:.1f}':>27} {f'{aging[0]} -> {aging[1]}':>28}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="seed-3x8")
    p.add_argument("--policies", default=POLICIES)
    p.add_argument("--every", type=int, default=1, help="only every N-th window of each split (a quicker look)")
    p.add_argument("--tenants", help=f"tenants to draw windows' tenants from (seed-3x8: {SEED_TENANTS})")
    p.add_argument("--short-first", action="store_true", help="the learned arm also has scheduler.short_first on")
    p.add_argument("--traces")
    p.add_argument("--json", metavar="OUT.json", help="also write every window's figures")
    args = p.parse_args(argv)
    sw = Sweep.load(args.scenario, args.traces)
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    tenants = args.tenants or (SEED_TENANTS if args.scenario == "seed-3x8" else None)
    dev, held = split(sw.candidates(**({"tenants": tenants.split(",")} if tenants else {})))
    dev, held = dev[:: args.every], held[:: args.every]
    arm = "learned + short_first" if args.short_first else "learned"
    print(
        f"{args.scenario}: {len(dev)} development and {len(held)} held-out windows; policies {', '.join(policies)}; "
        f"'learned' is: {arm}"
    )
    out: dict[str, dict[str, list[dict]]] = {}
    t0 = time.perf_counter()
    for name, wins in (("DEVELOPMENT", dev), ("HELD OUT", held)):
        rows: dict[str, list[dict]] = {pol: [] for pol in policies}
        for i, w in enumerate(wins, 1):
            for pol in policies:
                rows[pol].append(
                    dict(replay(sw, w, pol, args.short_first), window=w.label(sw.trace), tenants=list(w.tenants))
                )
            print(f"  [{name} {i}/{len(wins)}] {w.label(sw.trace)} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        out[name] = rows
        table(name, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
