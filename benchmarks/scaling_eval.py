"""Forecast-driven elastic pools vs fixed pools, in the trace-driven simulator.

Workload: three weeks of the Philly trace (jobs submitted 2017-10-09 00:00 -> 2017-10-30
00:00, VCs 6214e9, 6c71a0, 11cb48, 103959: 25,986 jobs, 1-16 GPUs), replayed by the
simulator (jupyter_gpusched/sim/engine.py) through the `dynamic` policy; priorities drawn
20/50/30, normal and low preemptible, checkpoints every 30 min (as in the built-in
scenarios). 8-GPU nodes at $3.06/GPU-h on demand (AWS p3.16xlarge list price per GPU),
$0.92 on spot (interrupted after 12 h on average, at least 30 min: the scenarios'
assumption), 5 minutes to bring a node up.

Cluster variants:
- fixed-p50 / fixed-p90 / fixed-max: a fixed on-demand pool sized to the median, 90th
  percentile and maximum of the offered load (GPUs jobs would hold if each started on
  submit) over the measured week;
- reactive: an elastic on-demand pool (2..48 nodes) sized every 10 min to the demand
  seen now (GPUs queued + running), 1 h cool-down before shrinking;
- reactive+25%: the same with 25% headroom, which buys about as many GPUs as `forecast`
  does: is it the forecast that helps, or just the extra capacity? (any reactive+N% works)
- forecast: the same pool sized by core.scaling from the upper edge of the forecaster's
  80% band (prophet-ar, refitted every 6 h on the demand the policy itself observed)
  over the next 30 min, or the demand now if higher; 1 h cool-down;
- forecast+spot: as forecast, half the wanted GPUs on an elastic spot pool (0..48 nodes);
- forecast+auto-spot: as forecast+spot, with the share for spot learnt (spot_share "auto":
  the preemptible jobs' share of the GPU-hours asked for over the last week);
- any elastic variant with "+N%" after its name gets N% headroom (forecast+auto-spot+10%:
  what headroom buys the non-preemptible jobs' wait with a learnt share; not run by default).

Measured on the third week (jobs submitted 2017-10-23 -> 10-30; capacity and cost over
that week): the first two weeks give the forecaster its history (it falls back to the
mean and seasonal-naive during the first two days and has weekly seasonality from day 14).

    .venv/bin/python benchmarks/scaling_eval.py [--json out.json] [--variants forecast,reactive]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from jupyter_gpusched.core.policies import make_policy
from jupyter_gpusched.core.scaling import DemandFeed, ElasticPolicy, ElasticScaler, PoolSizing, ScalingConfig
from jupyter_gpusched.sim.engine import Simulation
from jupyter_gpusched.sim.scenario import scenario_from_dict, traces_dir

DAY = 86400.0
TENANTS = ["6214e9", "6c71a0", "11cb48", "103959"]
OD_PRICE, SPOT_PRICE, NODE_GPUS = 3.06, 0.92, 8
MEASURE = (14 * DAY, 21 * DAY)  # seconds from the first submit
SPOT_LIFETIME = {"distribution": "exponential", "mean_s": 43200, "min_s": 1800, "max_s": 86400}


def scenario(pools):
    return {
        "name": "scaling-eval",
        "seed": 1,
        "trace": {
            "format": "philly",
            "path": "${traces}/microsoft_philly_2017/philly_jobs_pollux.csv.gz",
            "window": {"start": "2017-10-09 00:00:00", "end": "2017-10-30 00:00:00"},
            "tenants": TENANTS,
        },
        "pools": pools,
        "tenants": [{"name": t, "share": 1} for t in TENANTS],
        "jobs": {
            "priority_mix": {"high": 0.2, "normal": 0.5, "low": 0.3},
            "preemptible": {"priorities": ["normal", "low"]},
            "checkpoint": {"interval_s": 1800, "cost_s": 30, "restore_s": 60, "applies_to": "all"},
        },
        "policies": ["dynamic"],
    }


def offered_load(jobs, t0: float, step: float = 600.0) -> np.ndarray:
    sub = np.array([j.trace.submit for j in jobs]) - t0
    end = sub + np.array([j.trace.duration for j in jobs])
    g = np.array([j.trace.gpus for j in jobs], dtype=float)
    n = int(MEASURE[1] // step)
    d = np.zeros(n + 1)
    np.add.at(d, np.minimum((sub // step).astype(int), n), g)
    np.add.at(d, np.minimum((end // step).astype(int), n), -g)
    return np.cumsum(d)[:n]


class Recorder(ElasticPolicy):
    """ElasticPolicy that also records, at every scheduling pass where it changed, each
    pool's GPUs and the GPUs allocated (for cost and utilisation over the measured week)."""

    def __init__(self, *a, pools=(), **kw):
        super().__init__(*a, **kw)
        self.pool_names = list(pools)
        self.trace: list[tuple[float, tuple[int, ...], int]] = []

    def schedule(self, s, now):
        super().schedule(s, now)
        cl = s.cluster
        row = (tuple(cl.pool_gpus(p) for p in self.pool_names), cl.total_gpus - cl.free_gpus)
        if not self.trace or self.trace[-1][1:] != row:
            self.trace.append((now, *row))

    def integrate(self, a: float, b: float) -> tuple[list[float], float]:
        """GPU-seconds provisioned per pool and allocated over [a, b)."""
        prov = [0.0] * len(self.pool_names)
        alloc = 0.0
        for (t, caps, al), nxt in zip(self.trace, self.trace[1:] + [(math.inf, None, None)], strict=True):
            lo, hi = max(t, a), min(nxt[0], b)
            if hi > lo:
                for i, c in enumerate(caps):
                    prov[i] += c * (hi - lo)
                alloc += al * (hi - lo)
        return prov, alloc


def run_variant(name: str, nodes: int, traces: Path, verbose: bool = True) -> dict:
    # a trailing "+N%" on an elastic variant adds N% headroom (reactive+25%, forecast+auto-spot+10%)
    base, _, pct = name.rpartition("+") if name.endswith("%") else (name, "", "")
    headroom = float(pct[:-1]) / 100 if pct else 0.0
    spot = base in ("forecast+spot", "forecast+auto-spot")
    elastic = base in ("reactive", "forecast") or spot
    od = {
        "name": "ondemand",
        "nodes": nodes,
        "gpus_per_node": NODE_GPUS,
        "price_per_gpu_hour": OD_PRICE,
        "provision_s": 300,
    }
    if elastic:
        od.update(min_nodes=2, max_nodes=48)
    pools = [od]
    if spot:
        pools.append(
            {
                "name": "spot",
                "spot": True,
                "nodes": 0,
                "min_nodes": 0,
                "max_nodes": 48,
                "gpus_per_node": NODE_GPUS,
                "provision_s": 300,
                "price_per_gpu_hour": SPOT_PRICE,
                "lifetime": SPOT_LIFETIME,
                "replace_after_s": 600,
            }
        )
    sc = scenario_from_dict(scenario(pools), traces=traces)
    sizing = [PoolSizing(p.name, p.node_gpus, p.min_nodes, p.max_nodes, p.spot) for p in sc.pools] if elastic else []
    cfg = ScalingConfig(
        lead_s=1800.0,
        cooldown_s=3600.0,
        spot_share={"forecast+spot": 0.5, "forecast+auto-spot": None}.get(base, 0.0),
        headroom=headroom,
    )
    feed = (
        DemandFeed(model="prophet-ar", horizon_s=6 * 3600, refit_s=6 * 3600, interval=0.8)
        if base.startswith("forecast")
        else None
    )
    policy = Recorder(
        make_policy("dynamic"), ElasticScaler(sizing, cfg), feed, interval_s=600.0, pools=[p.name for p in sc.pools]
    )
    wall0 = time.perf_counter()
    sim = Simulation(
        sc.jobs,
        sc.pools,
        sc.tenants_for("dynamic"),
        policy,
        seed=sc.seed,
        config=sc.scheduler,
        checkpoint=sc.checkpoint,
    )
    res = sim.run()
    wall = time.perf_counter() - wall0
    t0 = res.start
    a, b = t0 + MEASURE[0], t0 + MEASURE[1]
    prov, alloc = policy.integrate(a, b)
    prices = {"ondemand": OD_PRICE, "spot": SPOT_PRICE}
    cost = sum(p_s / 3600 * prices[n] for p_s, n in zip(prov, policy.pool_names, strict=True))
    window = [j for j in res.jobs if a <= j.submit < b]
    waits = np.array([j.wait for j in window if j.wait is not None])
    firm = np.array([j.wait for j in window if j.wait is not None and not j.preemptible])
    unstarted = sum(1 for j in window if j.wait is None and j.state not in ("CANCELLED", "REJECTED"))
    out = {
        "variant": name,
        "initial_nodes": nodes,
        "jobs_in_week": len(window),
        "not_started": unstarted,
        "rejected": sum(1 for j in window if j.state == "REJECTED"),
        "mean_wait_min": float(waits.mean() / 60) if len(waits) else None,
        "p50_wait_min": float(np.percentile(waits, 50) / 60) if len(waits) else None,
        "p95_wait_min": float(np.percentile(waits, 95) / 60) if len(waits) else None,
        "share_waiting_over_10min": float((waits > 600).mean()) if len(waits) else None,
        # the work that may not run on spot: what a too-small on-demand base would keep waiting
        "spot_share_last": policy.last_advice.spot_share if policy.last_advice else None,
        "p95_wait_min_non_preemptible": float(np.percentile(firm, 95) / 60) if len(firm) else None,
        "gpu_hours_provisioned": {n: p_s / 3600 for n, p_s in zip(policy.pool_names, prov, strict=True)},
        "mean_gpus": sum(prov) / (b - a),
        "utilization": alloc / sum(prov) if sum(prov) else None,
        "cost_week_usd": cost,
        "scale_decisions": len(policy.decisions),
        "interruptions": res.interruptions,
        "preemptions": sum(j.preemptions for j in window),
        "run_cost_usd_engine": sum(res.cost_by_pool.values()),
        "sim_wall_s": wall,
    }
    if feed is not None:
        out["forecast_fits"] = feed.fits
        out["forecast_fit_s_total"] = feed.fit_s
        out["forecast_models"] = dict(feed.models_used)
    if verbose:
        print(f"  {name}: {wall:.0f} s", file=sys.stderr, flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", help="the shared traces folder (default: ../shared/traces)")
    p.add_argument(
        "--variants",
        default="fixed-p50,fixed-p90,fixed-max,reactive,reactive+25%,forecast,forecast+spot,forecast+auto-spot",
    )
    p.add_argument("--json")
    args = p.parse_args(argv)
    traces = traces_dir(None, args.traces)
    if traces is None or not (traces / "microsoft_philly_2017").is_dir():
        print("the Philly trace is not there (../shared/traces/microsoft_philly_2017)", file=sys.stderr)
        return 2
    probe = scenario_from_dict(scenario([{"name": "ondemand", "nodes": 1, "gpus_per_node": NODE_GPUS}]), traces=traces)
    t0 = min(j.trace.submit for j in probe.jobs)
    load = offered_load(probe.jobs, t0)
    week = load[int(MEASURE[0] // 600) :]
    sizes = {
        "fixed-p50": math.ceil(np.percentile(week, 50) / NODE_GPUS),
        "fixed-p90": math.ceil(np.percentile(week, 90) / NODE_GPUS),
        "fixed-max": math.ceil(week.max() / NODE_GPUS),
    }
    start_nodes = sizes["fixed-p50"]
    rows = []
    for v in args.variants.split(","):
        rows.append(run_variant(v, sizes.get(v, start_nodes), traces))
    fmt = lambda x, d=1: "n/a" if x is None else f"{x:.{d}f}"  # noqa: E731
    print(
        f"\noffered load in the measured week: median {np.percentile(week, 50):.0f}, p90 {np.percentile(week, 90):.0f},"
        f" max {week.max():.0f} GPUs; mean {week.mean():.0f}\n"
    )
    head = [
        "variant",
        "mean GPUs",
        "util",
        "cost/week $",
        "mean wait min",
        "p95 wait min",
        "p95 wait, non-preemptible",
        ">10 min wait",
        "scale decisions",
        "spot interrupts (run)",
    ]
    table = [
        [
            r["variant"],
            fmt(r["mean_gpus"]),
            fmt(r["utilization"], 2),
            f"{r['cost_week_usd']:,.0f}",
            fmt(r["mean_wait_min"]),
            fmt(r["p95_wait_min"]),
            fmt(r["p95_wait_min_non_preemptible"]),
            fmt(r["share_waiting_over_10min"], 3),
            str(r["scale_decisions"]),
            str(r["interruptions"]),
        ]
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(head, *table, strict=True)]
    for line in [head, ["-" * w for w in widths], *table]:
        print(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths, strict=True)))
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "offered_load_week": {
                        "median": float(np.percentile(week, 50)),
                        "p90": float(np.percentile(week, 90)),
                        "max": float(week.max()),
                    },
                    "variants": rows,
                },
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
