"""Where `dynamic`'s average-JCT gap to tiresias comes from: the same windows replayed with each of
the promises `dynamic` keeps and tiresias does not taken away, one at a time and all together.

`dynamic` keeps three promises tiresias (as modelled here) does not:
- **classes**: a higher priority class goes first (with aging), whatever the jobs' lengths;
- **tenants**: each tenant's quota is guaranteed, borrowing is reclaimed for its owners;
- **reservation**: the first blocked job holds the nodes that free up soonest, so a large job is
  not passed forever by small ones (with no runtime estimates nothing may backfill onto them).
The arms: `dynamic` as configured; `-pause` (`pause_long_runs: false`: no pausing of long runs at
their checkpoints, `dynamic` before rule 8 of docs/scheduling.md); `-classes` (every job in one priority class, its preemptible
flag kept); `-tenants` (every job in one tenant whose quota is the whole cluster); `-reservation`
(`max_reservations: 0`); `-all` (the three together: what is left is `dynamic`'s own order and
placement). Then `tiresias*` (tiresias preempting only preemptible jobs, as `dynamic` must),
`tiresias` as published, `fifo`, and `srpt` (the oracle). Each arm's average JCT is divided by
tiresias's, srpt's and fifo's on the jobs both completed; median [worst] over the windows (JCT/fifo
is issue 12's "never more than 5% worse than fifo", per window).

None of the arms is a candidate policy: this measures what each promise costs, to say why the
issue-12 target (avg JCT <= 0.8x tiresias) is missed. Nothing is chosen from it.

    .venv/bin/python benchmarks/jct_gap.py seed-3x8 [--split dev|held|both]
    .venv/bin/python benchmarks/jct_gap.py alibaba-loaded --days 3.5 --load 0.8 [--split dev|held|both]

Window sweeps: seed-3x8 uses the 51 candidate windows (split by start time as
benchmarks/estimates_eval.py does); a load-sweep scenario (alibaba-loaded, philly-loaded) uses
`sim.loadsweep`'s windows at one offered load (odd windows held out).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from jupyter_gpusched.core.model import Priority
from jupyter_gpusched.sim.config import SimJob
from jupyter_gpusched.sim.loadsweep import LoadSweep
from jupyter_gpusched.sim.metrics import compare_on_common_jobs, summarize
from jupyter_gpusched.sim.report import run_policy
from jupyter_gpusched.sim.scenario import Scenario
from jupyter_gpusched.sim.windows import Sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))
from estimates_eval import SEED_TENANTS, split  # noqa: E402

ARMS = ("dynamic", "-pause", "-classes", "-tenants", "-reservation", "-all", "tiresias*", "tiresias", "fifo", "srpt")


def one_class(sc: Scenario) -> Scenario:
    out = copy.copy(sc)
    out.jobs = [replace(j, priority=Priority.NORMAL) for j in sc.jobs]
    return out


def one_tenant(sc: Scenario) -> Scenario:
    out = copy.copy(sc)
    out.jobs = [SimJob(replace(j.trace, tenant="all"), j.priority, j.preemptible) for j in sc.jobs]
    gpus = sum(p.max_gpus for p in sc.pools_of("dynamic"))
    out.tenant_terms = {"all": {"quota": gpus, "share": None, "burst": None}}
    out.budgets = {}
    return out


def no_pause(sc: Scenario) -> Scenario:
    out = copy.copy(sc)
    out.scheduler = replace(sc.scheduler, pause_long_runs=False)
    return out


def no_reservation(sc: Scenario) -> Scenario:
    out = copy.copy(sc)
    out.scheduler = replace(sc.scheduler, max_reservations=0)
    return out


def arm_runs(sc: Scenario, arms: tuple[str, ...]) -> dict:
    fair = copy.copy(sc)
    fair.policy_options = {
        **sc.policy_options,
        "tiresias": {**sc.policy_options.get("tiresias", {}), "only_preemptible": True},
    }
    runs = {
        "dynamic": lambda: run_policy(sc, "dynamic"),
        "-pause": lambda: run_policy(no_pause(sc), "dynamic"),
        "-classes": lambda: run_policy(one_class(sc), "dynamic"),
        "-tenants": lambda: run_policy(one_tenant(sc), "dynamic"),
        "-reservation": lambda: run_policy(no_reservation(sc), "dynamic"),
        "-all": lambda: run_policy(no_reservation(one_tenant(one_class(sc))), "dynamic"),
        "tiresias*": lambda: run_policy(fair, "tiresias"),
        "tiresias": lambda: run_policy(sc, "tiresias"),
        "fifo": lambda: run_policy(sc, "fifo"),
        "srpt": lambda: run_policy(sc, "srpt"),
    }
    # the yardsticks every ratio needs run whatever was asked for
    return {arm: run() for arm, run in runs.items() if arm in arms or arm in ("tiresias", "srpt", "fifo")}


def figures(sc: Scenario, arms: tuple[str, ...]) -> dict[str, dict]:
    runs = arm_runs(sc, arms)
    out = {}
    for arm, res in runs.items():
        s = summarize(res, sc.scheduler.aging_interval)
        out[arm] = {
            "jct/tiresias": compare_on_common_jobs(res, runs["tiresias"]).get("avg_jct_s"),
            "jct/srpt": compare_on_common_jobs(res, runs["srpt"]).get("avg_jct_s"),
            "jct/fifo": compare_on_common_jobs(res, runs["fifo"]).get("avg_jct_s"),
            "lost": s["gpu_hours_lost"],
            "max_wait_h": (s["max_wait_s"] or 0.0) / 3600,
        }
    return out


def cell(values: list) -> str:
    v = [x for x in values if x is not None]
    return f"{statistics.median(v):.2f} [{max(v):.2f}]" if v else "-"


def table(title: str, rows: list[dict[str, dict]], arms: tuple[str, ...]) -> None:
    print(f"\n{title} ({len(rows)} windows): median [worst]")
    head = (
        f"{'arm':<13} {'JCT/tiresias':>14} {'JCT/srpt':>14} {'JCT/fifo':>14} {'GPU-h lost':>12} {'longest wait h':>16}"
    )
    print(head)
    print("-" * len(head))
    for arm in arms:
        lost = statistics.median(r[arm]["lost"] for r in rows)
        print(
            f"{arm:<13} {cell([r[arm]['jct/tiresias'] for r in rows]):>14} "
            f"{cell([r[arm]['jct/srpt'] for r in rows]):>14} {cell([r[arm]['jct/fifo'] for r in rows]):>14} "
            f"{lost:>12.1f} {cell([r[arm]['max_wait_h'] for r in rows]):>16}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("scenario", nargs="?", default="seed-3x8")
    p.add_argument("--split", choices=("dev", "held", "both"), default="dev")
    p.add_argument("--days", type=float, default=7.0, help="load-sweep scenarios: window length in days")
    p.add_argument("--load", type=float, default=0.8, help="load-sweep scenarios: offered load")
    p.add_argument("--min-jobs", type=int, default=200)
    p.add_argument("--windows", type=int, help="only the first N windows of each split")
    p.add_argument("--arms", help=f"comma-separated, of {', '.join(ARMS)} (default: all)")
    p.add_argument("--traces")
    args = p.parse_args(argv)
    arms = tuple(a.strip() for a in args.arms.split(",")) if args.arms else ARMS
    if unknown := [a for a in arms if a not in ARMS]:
        p.error(f"unknown arm(s) {', '.join(unknown)}; arms: {', '.join(ARMS)}")
    splits = ("dev", "held") if args.split == "both" else (args.split,)
    t0 = time.perf_counter()
    sets: dict[str, list] = {}  # split -> [(label, scenario factory)]
    if args.scenario == "seed-3x8":
        sw = Sweep.load(args.scenario, args.traces)
        dev, held = split(sw.candidates(tenants=SEED_TENANTS.split(",")))
        for name, wins in (("dev", dev), ("held", held)):
            sets[name] = [(w.label(sw.trace), lambda w=w: sw.window(w)) for w in wins]
        what = "candidate windows"
    else:
        ls = LoadSweep.load(args.scenario, args.traces, args.days, args.min_jobs)
        for name, held_out in (("dev", False), ("held", True)):
            sets[name] = [
                (w.label(ls.trace), lambda w=w: ls.at(w, args.load)) for w in ls.windows if w.held_out == held_out
            ]
        what = f"{args.days:g}-day windows at offered load {args.load:g}"
    print(f"{args.scenario}: {what}; arms: {', '.join(arms)}")
    for name in splits:
        rows = []
        chosen = sets[name][: args.windows] if args.windows else sets[name]
        for i, (label, make) in enumerate(chosen, 1):
            rows.append(figures(make(), arms))
            print(f"  [{name} {i}/{len(chosen)}] {label} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        table({"dev": "DEVELOPMENT", "held": "HELD OUT"}[name], rows, arms)
    print(f"\nwhole run: {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
