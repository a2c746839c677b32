"""When will a queued job start? The scheduler's own policy, run forward on a copy of its state.

A count of free GPUs in queue order (what `estimate_start` did before) ignores quotas,
borrowing, reservations, packing and every other rule of the policy, so it told a tenant
at its quota, or a job larger than its tenant's quota (rule 7), that it would start as soon
as enough GPUs free up anywhere. Here the same policy decides, on a copy: each running job
ends at its projected end (`Scheduler.projected_end`: its start plus its runtime estimate),
each job the copy starts ends after its own estimate, runs write their checkpoints on time
(`dynamic` pauses long runs right after one), no new job arrives and no node comes or goes; a
run already past its estimate is taken to end now. The first time the copy starts the
job is the estimate.

It is unknown (None) when the copy runs out of ends before the job starts (it waits, directly
or not, on a job with no runtime estimate, and `QUIET_PASSES` passes after that decide nothing)
or needs more than `MAX_PASSES` scheduling passes
(bounded work: `Scheduler.estimate_start` reuses one run until the state changes).
"""

from __future__ import annotations

import copy
import heapq
import math
from typing import TYPE_CHECKING

from .model import Admit, Job, JobState, Preempt

if TYPE_CHECKING:  # pragma: no cover
    from .scheduler import Scheduler

MAX_PASSES = 1000
# With no run left that is expected to end, only the policy's wakeups move the copy on; after this
# many passes in a row that decide nothing, nothing will.
QUIET_PASSES = 200


class Lookahead:
    """One forward run of a copy of `s` from `now`, taken as far as the questions asked of it
    need: `start_of(job)` runs it on until that job starts (each start on the way is kept, so
    the next question about a job ahead of it costs nothing) or it can go no further."""

    def __init__(self, s: Scheduler, now: float, max_passes: int = MAX_PASSES) -> None:
        self.sim = fork(s)
        self.t = now
        self.passes_left = max_passes
        self.starts: dict[str, float] = {}
        self.ended = False  # ran out of ends, or of passes: any job not started has no estimate
        self.quiet = 0  # passes in a row that decided nothing with no end to come
        # (time, seq, job id, the run's start) of the copy's runs' ends, and of their next checkpoints
        self._ends: list[tuple[float, int, str, float]] = []
        self._checkpoints: list[tuple[float, int, str, float]] = []
        for j in list(self.sim.active.values()):
            if j.state is JobState.ADMITTED:  # being launched: count it as started now
                self.sim.started(j.id, now)
            self._run(j.id)

    def estimate(self, job_id: str, now: float) -> float | None:
        """`job_id`'s estimated start as asked at `now` (the run may have been made up to a minute
        before): when the copy starts it, never before `now`; None if it does not within its passes."""
        start = self.start_of(job_id)
        return None if start is None else max(now, start)

    def start_of(self, job_id: str) -> float | None:
        """When the copy starts `job_id`; None if it does not within its passes."""
        sim, ends, checkpoints = self.sim, self._ends, self._checkpoints
        while job_id not in self.starts and not self.ended:
            if self.passes_left <= 0:
                self.ended = True
                break
            self.passes_left -= 1
            t = self.t
            decisions = sim.schedule(t)
            self.quiet = 0 if decisions or ends else self.quiet + 1
            if self.quiet > QUIET_PASSES:
                self.ended = True
                break
            for d in decisions:
                if isinstance(d, Admit) and sim.jobs[d.job_id].state is JobState.ADMITTED:
                    sim.started(d.job_id, t)
                    self.starts.setdefault(d.job_id, t)
                    self._run(d.job_id)
            if any(isinstance(d, Preempt) for d in decisions):
                continue  # as a driver does: look again at once with the preempted jobs' GPUs free
            # The next pass: at the next end, or when the policy asks for one (`dynamic`: just after a
            # checkpoint that lets it pause a run). A checkpoint alone calls for no pass, as in the simulator.
            wake = sim.policy.next_wakeup(sim, t)
            t_next = min(ends[0][0] if ends else math.inf, wake if wake is not None and wake > t else math.inf)
            if math.isinf(t_next):
                self.ended = True
                break
            self.t = t = max(t, t_next)  # a run past its estimate is taken to end now
            while checkpoints and checkpoints[0][0] <= t:
                at, _, jid, started = heapq.heappop(checkpoints)
                job = sim.jobs[jid]
                interval = job.spec.checkpoint_interval
                if job.state is JobState.RUNNING and job.started_at == started and interval:  # not preempted since
                    at += math.floor((t - at) / interval) * interval  # the last one due by now: only it counts
                    sim.checkpointed(jid, at)
                    self._push(checkpoints, at + interval, job)
            while ends and ends[0][0] <= t:
                _, _, jid, started = heapq.heappop(ends)
                job = sim.jobs[jid]
                if job.state is JobState.RUNNING and job.started_at == started:
                    sim.finished(jid, t, ok=True)
        return self.starts.get(job_id)

    def _run(self, job_id: str) -> None:
        """File a running job's expected end and, if it checkpoints, its next checkpoint."""
        job = self.sim.jobs[job_id]
        end = self.sim.projected_end(job)
        if math.isfinite(end):
            self._push(self._ends, end, job)
        interval = job.spec.checkpoint_interval
        if interval is not None and job.started_at is not None:
            last = job.last_checkpoint_at
            since = last if last is not None and last > job.started_at else job.started_at
            self._push(self._checkpoints, since + interval, job)

    @staticmethod
    def _push(heap: list[tuple[float, int, str, float]], t: float, job: Job) -> None:
        assert job.started_at is not None  # every run of the copy has started
        heapq.heappush(heap, (t, job.seq, job.id, job.started_at))


def fork(s: Scheduler) -> Scheduler:
    """A copy of `s` to run forward without touching it. Jobs that have ended are shared, not
    copied, and the table of jobs is copied here in one go: a long history costs little. (A job's
    own copy is field by field, its spec shared: `Job.__deepcopy__`.)"""
    jobs: dict[str, Job] = {}
    memo: dict[int, object] = {id(s.events): [], id(s._lookahead): None, id(s.jobs): jobs}  # not the last run
    for job_id, j in s.jobs.items():
        if j.state.terminal:
            jobs[job_id] = memo[id(j)] = j  # (the policy's state may hold ended jobs too)
        else:
            jobs[job_id] = memo[id(j)] = copy.deepcopy(j)
    return copy.deepcopy(s, memo)
