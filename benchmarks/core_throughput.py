"""How fast is one scheduling pass of the pure core?

Scenario (defaults from the issue): 10,000 queued jobs (1/2/4/8 GPUs, three priorities,
8 tenants with quotas) on 1,000 nodes x 8 GPUs.

  (a) first pass from an empty cluster: its time and how many jobs it admitted;
  (b) steady state: finish a random 1% of the running jobs, submit as many replacements,
      run a pass; pass time p50 / p99 and sustained admissions per second;
  (c) a pass over a full cluster with 10,000 queued jobs where nothing fits.

Seeded and deterministic: the decisions digest is the same on every run (and must stay the
same when the core is made faster). Times are wall-clock (time.perf_counter) of the core's
calls only; the driver's own bookkeeping is not counted.

    python benchmarks/core_throughput.py
    python benchmarks/core_throughput.py --policy dynamic,fifo,static --json out.json
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

try:  # the installed package, or whichever copy PYTHONPATH names (to compare two versions)
    import jupyter_gpusched  # noqa: F401
except ImportError:  # pragma: no cover - run from a bare checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpusched.core import (  # noqa: E402
    Admit,
    Cluster,
    JobSpec,
    NodeSpec,
    Preempt,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
    Tenant,
    policy_names,
)

TARGET_PASS_S = 0.100
TARGET_ADMISSIONS_PER_S = 2000.0
SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
PRIORITIES = (Priority.HIGH, Priority.NORMAL, Priority.LOW)
PRIORITY_WEIGHTS = (0.2, 0.5, 0.3)


def make_tenants(n: int, total_gpus: int, rng: random.Random) -> list[Tenant]:
    """Quotas sum to ~90% of the cluster, unequal shares; half may burst without limit."""
    shares = [rng.uniform(0.5, 2.0) for _ in range(n)]
    scale = 0.9 * total_gpus / sum(shares)
    out = []
    for i, share in enumerate(shares):
        quota = max(8, int(share * scale))
        burst = None if i % 2 == 0 else quota // 2
        out.append(Tenant(f"t{i}", quota, burst))
    return out


class Workload:
    def __init__(self, tenants: list[Tenant], seed: int):
        self.rng = random.Random(seed)
        self.tenants = tenants

    def spec(self) -> JobSpec:
        rng = self.rng
        gpus = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        est = rng.choice((None, 600.0, 3600.0, 4 * 3600.0))
        return JobSpec(
            "train.ipynb",
            gpus=gpus,
            priority=rng.choices(PRIORITIES, PRIORITY_WEIGHTS)[0],
            tenant=rng.choice(self.tenants).name,
            est_runtime=est,
        )


class Digest:
    """A running hash of every decision, so two runs (or two versions of the core) can be
    compared: same digest, same decisions."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def add(self, decisions) -> None:
        for d in decisions:
            if isinstance(d, Admit):
                self.h.update(f"A{d.job_id}{d.allocation}{d.borrowed};".encode())
            elif isinstance(d, Preempt):
                self.h.update(f"P{d.job_id};".encode())
            else:
                self.h.update(repr(d).encode())

    def hexdigest(self) -> str:
        return self.h.hexdigest()[:16]


def timed_pass(s: Scheduler, now: float) -> tuple[float, list]:
    gc.collect()
    t = time.perf_counter()
    decisions = s.schedule(now)
    return time.perf_counter() - t, decisions


def start_all(s: Scheduler, decisions, now: float) -> float:
    t = time.perf_counter()
    for d in decisions:
        if isinstance(d, Admit):
            s.started(d.job_id, now)
    return time.perf_counter() - t


def admissions(decisions) -> int:
    return sum(isinstance(d, Admit) for d in decisions)


def run(policy: str, args) -> dict:
    rng = random.Random(args.seed)
    nodes = [NodeSpec(f"node-{i:05d}", args.gpus_per_node) for i in range(args.nodes)]
    total = args.nodes * args.gpus_per_node
    tenants = make_tenants(args.tenants, total, rng)
    work = Workload(tenants, args.seed + 1)
    digest = Digest()
    s = Scheduler(Cluster(nodes), tenants, policy, SchedulerConfig(aging_interval=3600.0))
    now = 0.0

    def submit(n: int) -> float:
        t = time.perf_counter()
        for _ in range(n):
            spec = work.spec()
            try:
                s.submit(spec, now)
            except SpecError:  # pragma: no cover - the workload fits every tenant's limit
                pass
        return time.perf_counter() - t

    submit(args.jobs)
    # (a) first pass from an empty cluster
    first_s, decisions = timed_pass(s, now)
    digest.add(decisions)
    first_admitted = admissions(decisions)
    start_all(s, decisions, now)

    # (b) steady state
    pass_times, admitted, core_total = [], 0, 0.0
    pick = random.Random(args.seed + 2)
    for _ in range(args.rounds):
        now += 60.0
        running = sorted((j for j in s.active.values()), key=lambda j: j.seq)
        done = pick.sample(running, max(1, int(len(running) * args.finish_fraction))) if running else []
        t = time.perf_counter()
        for job in done:
            s.finished(job.id, now, ok=True)
        core = time.perf_counter() - t
        core += submit(len(done))
        dt, decisions = timed_pass(s, now)
        digest.add(decisions)
        core += dt + start_all(s, decisions, now)
        pass_times.append(dt)
        admitted += admissions(decisions)
        core_total += core
    # (c) a full cluster: top the queue up, let passes settle until one decides nothing
    now += 60.0
    submit(max(0, args.jobs - len(s.queue)))
    settle = 0
    while settle < 50:
        dt, decisions = s.schedule(now), None
        if not dt:
            break
        digest.add(dt)
        start_all(s, dt, now)
        settle += 1
    full_times = []
    for _ in range(args.full_repeats):
        dt, decisions = timed_pass(s, now)
        assert not decisions, "a settled full cluster made a decision"
        full_times.append(dt)

    pt = sorted(pass_times)
    return {
        "policy": policy,
        "nodes": args.nodes,
        "gpus": total,
        "queued_jobs": args.jobs,
        "first_pass_s": first_s,
        "first_pass_admitted": first_admitted,
        "first_pass_admissions_per_s": first_admitted / first_s if first_s else None,
        "steady_rounds": args.rounds,
        "steady_pass_p50_s": statistics.median(pt) if pt else None,
        "steady_pass_p99_s": pt[min(len(pt) - 1, int(0.99 * len(pt)))] if pt else None,
        "steady_pass_max_s": pt[-1] if pt else None,
        "steady_admitted": admitted,
        "steady_admissions_per_s_pass": admitted / sum(pt) if pt and sum(pt) else None,
        "steady_admissions_per_s_core": admitted / core_total if core_total else None,
        "full_pass_p50_s": statistics.median(full_times) if full_times else None,
        "full_pass_max_s": max(full_times) if full_times else None,
        "full_queue": len(s.queue),
        "full_free_gpus": s.cluster.free_gpus,
        "settle_passes": settle,
        "decisions_digest": digest.hexdigest(),
    }


def ms(x: float | None) -> str:
    return "-" if x is None else f"{1000 * x:8.1f} ms"


def rate(x: float | None) -> str:
    return "-" if x is None else f"{x:10,.0f}/s"


def table(results: list[dict]) -> str:
    rows = [
        ("(a) first pass", lambda r: ms(r["first_pass_s"])),
        ("(a) admitted by it", lambda r: f"{r['first_pass_admitted']:>11,}"),
        ("(b) steady pass p50", lambda r: ms(r["steady_pass_p50_s"])),
        ("(b) steady pass p99", lambda r: ms(r["steady_pass_p99_s"])),
        ("(b) admissions (pass time)", lambda r: rate(r["steady_admissions_per_s_pass"])),
        ("(b) admissions (all core calls)", lambda r: rate(r["steady_admissions_per_s_core"])),
        ("(c) full-cluster pass p50", lambda r: ms(r["full_pass_p50_s"])),
        ("(c) full-cluster pass max", lambda r: ms(r["full_pass_max_s"])),
        ("(c) queued / free GPUs", lambda r: f"{r['full_queue']:>6,} / {r['full_free_gpus']}"),
        ("decisions digest", lambda r: r["decisions_digest"]),
    ]
    width = max(len(name) for name, _ in rows)
    head = f"{'':{width}}  " + "  ".join(f"{r['policy']:>16}" for r in results)
    lines = [head, "-" * len(head)]
    for name, cell in rows:
        lines.append(f"{name:{width}}  " + "  ".join(f"{cell(r):>16}" for r in results))
    return "\n".join(lines)


def verdict(r: dict) -> str:
    worst = max(r["first_pass_s"], r["steady_pass_p99_s"] or 0, r["full_pass_max_s"] or 0)
    ok_pass = worst < TARGET_PASS_S
    ok_rate = (r["steady_admissions_per_s_core"] or 0) >= TARGET_ADMISSIONS_PER_S
    return (
        f"{r['policy']}: slowest pass {1000 * worst:.1f} ms "
        f"({'meets' if ok_pass else 'MISSES'} < {1000 * TARGET_PASS_S:.0f} ms); "
        f"{r['steady_admissions_per_s_core']:,.0f} admissions/s "
        f"({'meets' if ok_rate else 'MISSES'} >= {TARGET_ADMISSIONS_PER_S:,.0f}/s)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--jobs", type=int, default=10_000, help="queued jobs")
    p.add_argument("--tenants", type=int, default=8)
    p.add_argument("--rounds", type=int, default=200, help="steady-state rounds")
    p.add_argument("--finish-fraction", type=float, default=0.01, help="running jobs finished per round")
    p.add_argument("--full-repeats", type=int, default=20, help="timed passes over the full cluster")
    p.add_argument("--policy", default="dynamic", help=f"comma-separated, from: {', '.join(policy_names())}")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = p.parse_args(argv)
    policies = [x.strip() for x in args.policy.split(",") if x.strip()]
    unknown = sorted(set(policies) - set(policy_names()))
    if unknown:
        p.error(f"unknown policy {', '.join(unknown)}; choose from {', '.join(policy_names())}")

    results = [run(policy, args) for policy in policies]
    import jupyter_gpusched

    print(
        f"core throughput: {args.nodes} nodes x {args.gpus_per_node} GPUs, {args.jobs:,} queued jobs, "
        f"{args.tenants} tenants, seed {args.seed}, Python {platform.python_version()}, "
        f"core from {Path(jupyter_gpusched.__file__).parent}"
    )
    print(table(results))
    for r in results:
        print(verdict(r))
    if args.json:
        meta = {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "core": str(Path(jupyter_gpusched.__file__).parent),
            "args": vars(args),
        }
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
