"""How a replay's cost grows with the number of jobs (and so with the queue's length).

A synthetic loaded workload: 4 tenants (quota 16 each) on 8 nodes x 8 GPUs, Poisson
arrivals at `--load` of capacity, 1-16 GPUs (mostly small), log-normal durations, priorities
20/50/30 high/normal/low, normal and low preemptible with checkpoints every 30 min. The
`spot-hybrid` runs on its own pools (`pools`). The
same generator (seeded) at each size, so a longer run is the same process for longer and
the queue gets longer. Prints each policy's CPU time per size (CPU, not wall: steadier on a
shared machine) and the growth exponent log(t2 / t1) / log(n2 / n1) between consecutive
sizes (1.0: linear in the work).

    PYTHONPATH=. .venv/bin/python benchmarks/replay_scaling.py [--sizes 5000,20000] [--policies dynamic,static]
    PYTHONPATH=. .venv/bin/python benchmarks/replay_scaling.py --quality 3000 --policies dynamic,fifo
    PYTHONPATH=. .venv/bin/python benchmarks/replay_scaling.py --scenario philly-loaded --policies dynamic

`--quality` and `--scenario` (one replay of a built-in scenario, CPU seconds) also print the
schedule's digest: a hash of every job's first start, end, attempts, preemptions and final
state, so a change meant to leave the schedule alone can be checked with this script run on
the trees before and after (PYTHONPATH picks the tree). The timing mode prints the digest of its
largest size too.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import time

from jupyter_gpusched.core.model import NodeSpec, Priority, Tenant
from jupyter_gpusched.sim.config import Lifetime
from jupyter_gpusched.sim.engine import CheckpointModel, PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.metrics import summarize
from jupyter_gpusched.sim.report import run_policy
from jupyter_gpusched.sim.results import SimResult
from jupyter_gpusched.sim.scenario import load_scenario
from jupyter_gpusched.sim.traces import TraceJob

NODES, GPUS = 8, 8
TENANTS = [Tenant(f"t{i}", 16) for i in range(4)]


def pools(policy: str) -> list[PoolConfig]:
    """The 8 on-demand nodes; for `spot-hybrid`, as in the built-in scenarios, half of them on
    demand and up to as many spot nodes bought as needed (lifetimes 12 h on average, 30 min to
    24 h), so its spot side (moves, scaling, interruptions) is part of what is timed."""

    def od(n: int) -> PoolConfig:
        return PoolConfig("od", tuple(NodeSpec(f"od-{i}", GPUS, "od") for i in range(n)), 3.0, gpus_per_node=GPUS)

    if policy != "spot-hybrid":
        return [od(NODES)]
    life = Lifetime("exponential", mean_s=43200, min_s=1800, max_s=86400)
    spot = PoolConfig("spot", (), 0.9, spot=True, lifetime=life, gpus_per_node=GPUS, max_nodes=NODES - NODES // 2)
    return [od(NODES // 2), spot]


def workload(n: int, load: float, seed: int = 7) -> list[SimJob]:
    rng = random.Random(seed)
    sizes, weights = [1, 2, 4, 8, 16], [50, 20, 15, 10, 5]
    mean_gpus = sum(s * w for s, w in zip(sizes, weights, strict=True)) / sum(weights)
    mu, sigma = math.log(1800), 1.2
    mean_dur = math.exp(mu + sigma**2 / 2)
    rate = load * NODES * GPUS / (mean_gpus * mean_dur)  # arrivals per second
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(rate)
        prio = rng.choices([Priority.HIGH, Priority.NORMAL, Priority.LOW], [20, 50, 30])[0]
        tj = TraceJob(f"j{i}", t, min(rng.lognormvariate(mu, sigma), 7 * 86400), rng.choices(sizes, weights)[0],
                      rng.choice(TENANTS).name)  # fmt: skip
        jobs.append(SimJob(tj, prio, prio is not Priority.HIGH))
    return jobs


def digest(res: SimResult) -> str:
    rows = sorted((j.id, repr(j.first_start), repr(j.end), j.attempts, j.preemptions, j.state) for j in res.jobs)
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def scenario(name: str, policies: list[str]) -> None:
    for pol in policies:
        sc = load_scenario(name)
        t0 = time.process_time()
        res = run_policy(sc, pol)
        cpu = time.process_time() - t0
        maxq = int(max(res.series_queued)) if len(res.series_queued) else 0
        print(f"{name} {pol:10} {len(res.jobs)} jobs {cpu:.1f} CPU-s max queue {maxq} digest {digest(res)}", flush=True)


def quality(n: int, load: float, policies: list[str]) -> None:
    ck = CheckpointModel(interval_s=1800, cost_s=30, restore_s=60, applies_to="preemptible")
    for pol in policies:
        res = Simulation(workload(n, load), pools(pol), TENANTS, pol, checkpoint=ck).run()
        s = summarize(res)
        print(
            f"{pol:10} util {s['utilization']:.3f} avgJCT_h {s['avg_jct_s'] / 3600:.2f} "
            f"p99_h {s['p99_jct_s'] / 3600:.1f} makespan_h {s['makespan_s'] / 3600:.1f} "
            f"overtaken {s['low_priority_overtaken']} preempt {s['preemptions']} lost {s['gpu_hours_lost']:.0f} "
            f"digest {digest(res)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="5000,20000")
    ap.add_argument("--policies", default="fifo,static,dynamic,spot-hybrid,tiresias,srpt")
    ap.add_argument("--load", type=float, default=0.9)
    ap.add_argument("--quality", type=int, metavar="N", help="instead: the schedule's figures for N jobs")
    ap.add_argument("--scenario", metavar="NAME", help="instead: one replay of a built-in scenario per policy")
    args = ap.parse_args()
    if args.scenario:
        return scenario(args.scenario, args.policies.split(","))
    if args.quality:
        return quality(args.quality, args.load, args.policies.split(","))
    sizes = [int(x) for x in args.sizes.split(",")]
    ck = CheckpointModel(interval_s=1800, cost_s=30, restore_s=60, applies_to="preemptible")
    print(f"load {args.load}, {NODES} x {GPUS} GPUs; CPU seconds per size, growth exponent between sizes")
    print(f"{'policy':<10} " + " ".join(f"{n:>9}" for n in sizes) + "  exponent  max queue  digest (largest size)")
    for pol in args.policies.split(","):
        walls, maxq = [], 0
        for n in sizes:
            sim = Simulation(workload(n, args.load), pools(pol), TENANTS, pol, checkpoint=ck)
            t0 = time.process_time()
            res = sim.run()
            walls.append(time.process_time() - t0)
            maxq = max(res.series_queued) if len(res.series_queued) else 0
        exps = [math.log(walls[i + 1] / walls[i]) / math.log(sizes[i + 1] / sizes[i]) for i in range(len(sizes) - 1)]
        cells = " ".join(f"{w:9.1f}" for w in walls)
        print(f"{pol:<10} {cells}  {' '.join(f'{e:.2f}' for e in exps):>8}  {int(maxq):>9}  {digest(res)}", flush=True)


if __name__ == "__main__":
    main()
