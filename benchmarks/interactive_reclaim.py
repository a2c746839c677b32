"""What idle reclaim of GPU kernels buys: GPU-hours given back and queueing delay, with and without it.

There is no interactive trace here, so sessions are synthetic (seeded; say so when quoting the figures):
- a shared box of 8 GPUs, one tenant owning them all (the single-box lab setup docs/interactive.md targets);
- GPU-kernel sessions arrive 09:00-18:00 on weekdays (Poisson, one per `--session-gap` minutes); each lasts
  2-10 h of wall time, of which only `--active` (default 0.3) is execution: bursts (exp, mean 20 min)
  between idle gaps (exp, mean set by the fraction), the last gap stretching to the session's end;
- batch notebook jobs arrive all day (Poisson, one per `--job-gap` minutes), 1 GPU, runtime exp mean 2 h
  (their runtime estimate is their max_runtime, as in the live service);
- with reclaim, the real rules (core/idle.py: warned after `--timeout`, reclaimed `--warn` later, only while
  someone waits) shut an idle kernel down; its user's next burst queues a new request (a kernel restart).
  The users' plans are not shifted by waiting: the part of a burst spent waiting for GPUs counts as queueing
  delay (kernel wait) and is not executed later.
The scheduler is the real core (`Scheduler`, policy `dynamic`), stepped one minute at a time.

    python benchmarks/interactive_reclaim.py            # 5 simulated days
"""

from __future__ import annotations

import argparse
import random
import statistics

from jupyter_gpusched.core import Cluster, JobSpec, JobState, NodeSpec, Scheduler, Tenant
from jupyter_gpusched.core.idle import IdleAction, IdleClock, IdlePolicy, idle_action

MIN = 60.0
HOUR = 3600.0


def sessions(rng: random.Random, days: int, gap: float, active: float) -> list[list[tuple[float, float]]]:
    """Each session: its execution bursts [(start, end)] in absolute seconds."""
    out = []
    for day in range(days):
        if day % 7 >= 5:
            continue
        t = day * 24 * HOUR + 9 * HOUR
        while True:
            t += rng.expovariate(1 / (gap * MIN))
            if t > day * 24 * HOUR + 18 * HOUR:
                break
            end = t + rng.uniform(2, 10) * HOUR
            bursts, s = [], t
            mean_gap = 20 * MIN * (1 - active) / active
            while s < end:
                b = min(end, s + rng.expovariate(1 / (20 * MIN)))
                bursts.append((s, b))
                s = b + rng.expovariate(1 / mean_gap)
            out.append(bursts)
    return out


def batch_jobs(rng: random.Random, days: int, gap: float) -> list[tuple[float, float]]:
    out, t = [], 0.0
    while True:
        t += rng.expovariate(1 / (gap * MIN))
        if t > days * 24 * HOUR:
            return out
        out.append((t, max(5 * MIN, rng.expovariate(1 / (2 * HOUR)))))


def simulate(args: argparse.Namespace, reclaim: bool) -> dict[str, float]:
    rng = random.Random(args.seed)
    plans = sessions(rng, args.days, args.session_gap, args.active)
    jobs = batch_jobs(rng, args.days, args.job_gap)
    s = Scheduler(Cluster([NodeSpec("box", args.gpus)]), [Tenant("lab", args.gpus)], "dynamic")
    policy = IdlePolicy(args.timeout * MIN, args.warn * MIN, max_keep=0.0)
    kernel: dict[int, str] = {}  # session -> its current request
    clocks: dict[int, IdleClock] = {}
    end_at: dict[str, float] = {}  # batch job -> its end once running
    waits_kernel: list[float] = []
    waits_batch: list[float] = []
    held = executing = reclaimed = 0.0
    pending_jobs = list(jobs)
    horizon = args.days * 24 * HOUR + 12 * HOUR
    now = 0.0
    while now < horizon:
        while pending_jobs and pending_jobs[0][0] <= now:
            t, runtime = pending_jobs.pop(0)
            j = s.submit(JobSpec("job.ipynb", tenant="lab", max_runtime=runtime), t)
            end_at[j.id] = runtime
        for i, bursts in enumerate(plans):
            busy = any(a <= now < b for a, b in bursts)
            over = now >= bursts[-1][1]
            jid = kernel.get(i)
            job = s.jobs[jid] if jid else None
            if over and job is not None and not job.state.terminal:
                s.cancel(jid, now)  # the user shut the kernel down
                continue
            if busy and (job is None or job.state.terminal):  # (re)start the kernel: queue a request
                kernel[i] = s.submit(JobSpec(f"kernel:{i}", tenant="lab", interactive=True), now).id
                clocks[i] = IdleClock(now)
                continue
            if job is None or job.state is not JobState.RUNNING:
                continue
            held += MIN
            executing += MIN if busy else 0.0
            if reclaim:
                clock = clocks[i]
                action = idle_action(clock, now, busy, len(s.queue) > 0, policy)
                if action is IdleAction.WARN:
                    clock.warned_at = now
                elif action is IdleAction.RECLAIM:
                    reclaimed += max(0.0, next((a for a, _ in bursts if a > now), bursts[-1][1]) - now)
                    s.cancel(jid, now, reason="idle: GPUs reclaimed")
        for jid, job in list(s.active.items()):
            if not job.spec.interactive and job.state is JobState.RUNNING and now >= job.started_at + end_at[jid]:
                s.finished(jid, now, ok=True)
        for d in s.schedule(now):
            job = s.jobs[d.job_id]
            if job.state is JobState.ADMITTED:
                s.started(job.id, now)
                (waits_kernel if job.spec.interactive else waits_batch).append(now - job.submitted_at)
        now += MIN
    return {
        "kernel GPU-h held": held / HOUR,
        "kernel GPU-h executing": executing / HOUR,
        "idle GPU-h reclaimed": reclaimed / HOUR,
        "batch wait mean (min)": statistics.fmean(waits_batch) / MIN if waits_batch else 0.0,
        "batch wait p90 (min)": _p90(waits_batch) / MIN,
        "kernel wait mean (min)": statistics.fmean(waits_kernel) / MIN if waits_kernel else 0.0,
        "kernel wait p90 (min)": _p90(waits_kernel) / MIN,
        "kernel starts": float(len(waits_kernel)),
        "batch jobs started": float(len(waits_batch)),
    }


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))] if xs else 0.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=5)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--session-gap", type=float, default=45.0, help="minutes between session arrivals (09-18h)")
    p.add_argument("--job-gap", type=float, default=40.0, help="minutes between batch job arrivals")
    p.add_argument("--active", type=float, default=0.3, help="fraction of a session spent executing")
    p.add_argument("--timeout", type=float, default=30.0, help="idle minutes before the warning")
    p.add_argument("--warn", type=float, default=10.0, help="minutes between warning and reclaim")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    off, on = simulate(args, reclaim=False), simulate(args, reclaim=True)
    print(f"{'':26s}{'no reclaim':>12s}{'reclaim':>12s}")
    for key in off:
        print(f"{key:26s}{off[key]:12.1f}{on[key]:12.1f}")


if __name__ == "__main__":
    main()
