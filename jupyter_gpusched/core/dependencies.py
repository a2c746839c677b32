"""Pipelines: when a WAITING job may enter the queue, and when its dependencies doom it.

Pure: the driver hands in the waiting jobs and every job's state, and applies what comes back
(release -> `Scheduler.release`, cancel -> `Scheduler.cancel`). A cancellation may doom further
waiting jobs; `settle` follows such chains to the end in one call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .model import Job, JobState

WHEN_CHOICES = ("succeeded", "ended")


@dataclass(frozen=True, slots=True)
class Release:
    job_id: str


@dataclass(frozen=True, slots=True)
class Doom:
    """Cancel `job_id`: dependency `dependency` ended as `state`, and the job runs only after a success."""

    job_id: str
    dependency: str
    state: JobState

    @property
    def message(self) -> str:
        return f"dependency {self.dependency} {self.state.value.lower()}; not run (when: succeeded)"


def verdict(job: Job, states: Mapping[str, JobState]) -> Release | Doom | None:
    """What to do with one WAITING job now (None: keep waiting). A dependency the driver does not know
    counts as not ended."""
    pending = False
    for dep in job.spec.after:
        state = states.get(dep)
        if state is None or not state.terminal:
            pending = True
        elif state is not JobState.SUCCEEDED and job.spec.when == "succeeded":
            return Doom(job.id, dep, state)
    return None if pending else Release(job.id)


def settle(waiting: Iterable[Job], states: Mapping[str, JobState]) -> list[Release | Doom]:
    """Every release and cancellation the current states imply, cancellations cascading along chains."""
    states = dict(states)
    left = {job.id: job for job in waiting}
    out: list[Release | Doom] = []
    changed = True
    while changed:
        changed = False
        for job_id in sorted(left, key=lambda j: left[j].seq):
            decision = verdict(left[job_id], states)
            if decision is None:
                continue
            out.append(decision)
            del left[job_id]
            states[job_id] = JobState.QUEUED if isinstance(decision, Release) else JobState.CANCELLED
            changed = changed or isinstance(decision, Doom)
    return out


def check_edges(steps: int, edges: Sequence[Sequence[int]]) -> list[list[int]]:
    """Validate a pipeline's edges ([from, to] step indices) and return each step's parents.
    Raises ValueError naming the problem: a bad index, a self-loop, or a cycle."""
    parents: list[list[int]] = [[] for _ in range(steps)]
    for edge in edges:
        if (
            not isinstance(edge, (list, tuple))
            or len(edge) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in edge)
        ):
            raise ValueError(f"edge {edge!r} is not a pair of step indices [from, to]")
        a, b = edge
        if not (0 <= a < steps and 0 <= b < steps):
            raise ValueError(f"edge {[a, b]} names a step that does not exist (steps are 0..{steps - 1})")
        if a == b:
            raise ValueError(f"edge {[a, b]} makes step {a} depend on itself")
        if a not in parents[b]:
            parents[b].append(a)
    # Kahn's algorithm: whatever cannot be ordered lies on a cycle.
    indegree = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in range(steps)]
    for b, ps in enumerate(parents):
        for a in ps:
            children[a].append(b)
    ready = [i for i in range(steps) if indegree[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for c in children[i]:
            indegree[c] -= 1
            if indegree[c] == 0:
                ready.append(c)
    if seen < steps:
        cycle = sorted(i for i in range(steps) if indegree[i] > 0)
        raise ValueError(f"the edges form a cycle through steps {cycle}; a pipeline must be a DAG")
    return parents
