"""What one copy of the scheduler costs (`core.lookahead.fork`, taken on the server's event loop
before every forward run of an estimated start).

Builds a loaded `dynamic` scheduler: 59 nodes x 8 GPUs, 10 tenants of 47 GPUs, jobs of 1-16 GPUs
with runtime estimates submitted every 5 s and scheduled every 50 submissions, until `--queued`
jobs wait; then copies it `--repeats` times and prints the CPU time of a copy (median, best)
and the queue's length. The same seeded workload on any tree, so two trees compare side by side:

    PYTHONPATH=<tree> python benchmarks/fork_cost.py --queued 500,1500,3000
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from jupyter_gpusched.core import Admit, Cluster, JobSpec, NodeSpec, Priority, Scheduler, SchedulerConfig, Tenant
from jupyter_gpusched.core.lookahead import fork


def loaded(queued: int, seed: int = 1) -> Scheduler:
    rng = random.Random(seed)
    s = Scheduler(
        Cluster([NodeSpec(f"n{i}", 8) for i in range(59)]),
        [Tenant(f"t{i}", 47) for i in range(10)],
        "dynamic",
        SchedulerConfig(),
    )
    now, k = 0.0, 0
    while len(s.queue) < queued:
        spec = JobSpec(
            "nb.ipynb",
            gpus=rng.choice([1, 1, 1, 2, 4, 8, 8, 16]),
            tenant=f"t{rng.randrange(10)}",
            priority=rng.choice(list(Priority)),
            est_runtime=rng.uniform(600, 86400),
            preemptible=rng.random() < 0.5,
        )
        s.submit(spec, now)
        now, k = now + 5, k + 1
        if k % 50 == 0:
            for d in s.schedule(now):
                if isinstance(d, Admit):
                    s.started(d.job_id, now)
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queued", default="500,1500,3000", help="queue lengths (comma-separated)")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    for n in (int(x) for x in args.queued.split(",")):
        s = loaded(n)
        times = []
        for _ in range(args.repeats):
            t0 = time.process_time()
            fork(s)
            times.append(time.process_time() - t0)
        print(
            f"{len(s.queue):5} queued, {len(s.active):3} running, {len(s.jobs):5} jobs: one copy "
            f"{statistics.median(times) * 1000:6.1f} ms CPU (median of {args.repeats}; best {min(times) * 1000:.1f})"
        )


if __name__ == "__main__":
    main()
