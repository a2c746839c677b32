"""How good is the "estimated start" a user sees for a queued job?

Replays a built-in scenario under a policy with runtime estimates (`--estimates learned`: each
queued job's estimate comes from the jobs finished before it, as the live service learns them;
`exact`: the trace's true runtimes). Every `--every`-th job that is still queued after the pass
of its arrival is sampled: its estimated start is taken there, then compared with when the replay
really started it. Two estimators, on the same samples:

- `lookahead`: what the server shows (`Scheduler.estimate_start`, core/lookahead.py): the
  policy itself run forward on a copy of the scheduler;
- `count`: the estimate it replaced, kept here as the baseline: free GPUs counted in line order
  as running jobs end, ignoring quotas, borrowing, reservations and packing.

Prints, per estimator: how many samples get an estimate, the median and 90th-percentile absolute
error in hours, the share within an hour (or within 25% of the real wait) of the truth, and the
share that promised a start within an hour to a job that waited more than six; the median error
on the samples both estimate; and the CPU time of one `lookahead` call (a fresh forward run each:
median, worst) against the queue's length.

`--loop-stall` then asks again at the sample whose forward run took the most passes, on a copy
of the scheduler as it was there, inside an asyncio event loop with a 10 ms ticker on it: once on the loop
(`Scheduler.estimate_start`, as the server did before) and once as the server does now
(`ServiceViews.estimated_start`: the copy taken on the loop, the forward run in a thread). It
prints the longest the ticker was held up and the wall time of each (median of 3, alternated).

    PYTHONPATH=. .venv/bin/python benchmarks/start_estimates.py --scenario philly-loaded --policy dynamic
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import math
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from jupyter_gpusched.core.lookahead import MAX_PASSES, fork
from jupyter_gpusched.core.scheduler import Scheduler
from jupyter_gpusched.service.views import ServiceViews
from jupyter_gpusched.sim.engine import Simulation
from jupyter_gpusched.sim.report import run_policy
from jupyter_gpusched.sim.scenario import load_scenario

HOUR = 3600.0


def count_estimate(s: Scheduler, job_id: str, now: float) -> float | None:
    """The baseline: GPUs counted in line order as running (then earlier queued) jobs end."""
    free = s.cluster.free_gpus
    releases = sorted((s.projected_end(j), j.gpus) for j in s.active.values())
    ahead: list[tuple[float, int]] = []
    t = now
    for other in s.queue:
        while free < other.gpus:
            pending = sorted(releases + ahead)
            if not pending or math.isinf(pending[0][0]):
                return None
            end, gpus = pending[0]
            (releases if (end, gpus) in releases else ahead).remove((end, gpus))
            t, free = max(t, end), free + gpus
        if other.id == job_id:
            return t
        free -= other.gpus
        est = other.spec.runtime_estimate
        ahead.append((t + est if est is not None else math.inf, other.gpus))
    return None


# job id, sample time, lookahead's estimate, the count's, lookahead's CPU seconds, queue length
Sample = tuple[str, float, float | None, float | None, float, int]


class SampledSimulation(Simulation):
    """A replay that takes both estimates for every `every`-th arrival still queued after its pass."""

    def __init__(self, *args, every: int, samples: list[Sample], passes: list[int], costliest: list | None, **kw):
        super().__init__(*args, **kw)
        self.every = every
        self._arrived = 0
        self._due: list[str] = []
        self.samples = samples  # filled as the replay goes
        self.passes = passes  # scheduling passes each forward run took
        # [((passes, queue length), a copy of the scheduler as it was, job id, time)] of the forward run
        # with the most passes; None: no copies taken
        self.costliest: list[tuple[tuple[int, int], Scheduler, str, float]] | None = costliest

    def _on_arrive(self, job_id: str, b, t: float) -> bool:
        self._arrived += 1
        if self._arrived % self.every == 0:
            self._due.append(job_id)
        return super()._on_arrive(job_id, b, t)

    def _pass(self, t: float) -> None:
        super()._pass(t)
        s = self.scheduler
        for job_id in self._due:
            if job_id in s.queue:
                before = fork(s) if self.costliest is not None else None
                c0 = time.process_time()
                ahead = s.estimate_start(job_id, t)
                cpu = time.process_time() - c0
                run = s._lookahead[1] if s._lookahead is not None else None
                passes = MAX_PASSES - run.passes_left if run is not None else 0
                self.passes.append(passes)
                work = (passes, len(s.queue))  # (not its CPU time: a collection of garbage can land in any)
                if before is not None and self.costliest is not None:
                    if not self.costliest or work > self.costliest[0][0]:
                        self.costliest[:] = [(work, before, job_id, t)]
                self.samples.append((job_id, t, ahead, count_estimate(s, job_id, t), cpu, len(s.queue)))
        self._due = []


def score(name: str, rows: list[tuple[float, float | None]]) -> str:
    """rows: (true start - sample time, estimated start - sample time or None)."""
    got = [(true, est) for true, est in rows if est is not None]
    if not got:
        return f"{name:10} 0/{len(rows)} estimated"
    errs = sorted(abs(est - true) / HOUR for true, est in got)
    near = sum(abs(est - true) <= max(HOUR, 0.25 * true) for true, est in got)
    false_hope = sum(est <= HOUR and true > 6 * HOUR for true, est in got)
    p90 = errs[min(len(errs) - 1, int(0.9 * len(errs)))]
    late = statistics.median((est - true) / HOUR for true, est in got)
    return (
        f"{name:10} {len(got)}/{len(rows)} estimated; |error| median {statistics.median(errs):.2f} h, "
        f"p90 {p90:.2f} h, signed median {late:+.2f} h; "
        f"within 1 h or 25%: {near / len(got):.0%}; "
        f"said <= 1 h to a job that waited > 6 h: {false_hope}"
    )


async def held_up(ask) -> tuple[float, float]:
    """The longest a 10 ms ticker on the event loop waited past its time while `ask()` was awaited,
    and the wall time of `ask()`, in seconds."""
    late: list[float] = []
    asking = True

    async def ticker() -> None:
        last = time.perf_counter()
        while asking:
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            late.append(now - last - 0.01)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    w0 = time.perf_counter()
    await ask()
    wall = time.perf_counter() - w0
    asking = False
    await task
    return max(late), wall


def loop_stall(s: Scheduler, job_id: str, t: float, repeats: int = 3) -> None:
    """The event loop held up by one estimate, on the loop and as the server asks now; each on a fresh
    copy of `s` made beforehand (so with no forward run to reuse)."""
    executor = ThreadPoolExecutor(max_workers=1)
    results: dict[str, list[tuple[float, float]]] = {"on the loop": [], "server (thread)": []}
    answers = set()

    async def on_loop(copy: Scheduler) -> None:
        answers.add(copy.estimate_start(job_id, t))

    async def in_thread(copy: Scheduler) -> None:
        views = SimpleNamespace(backend=SimpleNamespace(admission="core"), clock=lambda: t, scheduler=copy)
        views.estimator = executor
        answers.add(await ServiceViews.estimated_start(views, copy.get(job_id)))  # type: ignore[arg-type]

    for _ in range(repeats):
        for name, ask in (("on the loop", on_loop), ("server (thread)", in_thread)):
            results[name].append(asyncio.run(held_up(functools.partial(ask, fork(s)))))
    executor.shutdown()
    for name, rows in results.items():
        print(
            f"{name:16} loop held up {statistics.median(r[0] for r in rows) * 1000:7.1f} ms, "
            f"answer in {statistics.median(r[1] for r in rows) * 1000:7.1f} ms (median of {repeats})"
        )
    print(f"same answer both ways: {len(answers) == 1}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="philly-loaded")
    ap.add_argument("--policy", default="dynamic")
    ap.add_argument("--estimates", choices=("learned", "exact"), default="learned")
    ap.add_argument("--every", type=int, default=25, help="sample every N-th arriving job (default 25)")
    ap.add_argument("--loop-stall", action="store_true", help="then time the costliest estimate on an event loop")
    args = ap.parse_args()
    sc = dataclasses.replace(load_scenario(args.scenario), estimates=args.estimates)
    samples: list[Sample] = []
    passes: list[int] = []
    costliest: list[tuple[tuple[int, int], Scheduler, str, float]] | None = [] if args.loop_stall else None
    res = run_policy(
        sc,
        args.policy,
        simulation=SampledSimulation,
        every=args.every,
        samples=samples,
        passes=passes,
        costliest=costliest,
    )
    first = {r.id: r.first_start for r in res.jobs}
    started = [(jid, t, a, c, cpu, q) for jid, t, a, c, cpu, q in samples if first.get(jid) is not None]
    print(
        f"{args.scenario} {args.policy}, {args.estimates} runtime estimates: {len(samples)} jobs sampled "
        f"waiting, {len(started)} of them started in the replay (mean true wait "
        f"{statistics.fmean(first[j] - t for j, t, *_ in started) / HOUR if started else 0:.2f} h)"
    )
    for name, k in (("lookahead", 2), ("count", 3)):
        print(score(name, [(first[row[0]] - row[1], None if row[k] is None else row[k] - row[1]) for row in started]))
    both = [row for row in started if row[2] is not None and row[3] is not None]
    if both:
        err = {k: statistics.median(abs(row[k] - first[row[0]]) / HOUR for row in both) for k in (2, 3)}
        print(f"on the {len(both)} both estimate: median |error| lookahead {err[2]:.2f} h, count {err[3]:.2f} h")
    cpus = sorted(row[4] for row in samples)
    if cpus:
        longest = max(samples, key=lambda row: row[5])
        print(
            f"lookahead CPU per call: median {statistics.median(cpus) * 1000:.1f} ms, worst {cpus[-1] * 1000:.1f} ms; "
            f"longest queue sampled {longest[5]} jobs ({longest[4] * 1000:.1f} ms)"
        )
        passes = sorted(passes)
        print(
            f"lookahead passes per call: median {statistics.median(passes):.0f}, "
            f"p90 {passes[int(0.9 * (len(passes) - 1))]}, most {passes[-1]} (of {MAX_PASSES})"
        )
    if costliest:
        (passes, _), s, job_id, t = costliest[0]
        print(f"the costliest estimate again ({passes} passes, {len(s.queue)} jobs queued, {len(s.active)} running):")
        loop_stall(s, job_id, t)


if __name__ == "__main__":
    main()
