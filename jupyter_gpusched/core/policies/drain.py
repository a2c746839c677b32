"""When nodes drain: the expected end of a running job and when a node will have room, for
`dynamic`'s reservations (docs/scheduling.md rule 5)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..model import Job

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler

INF = math.inf


def expected_end(s: Scheduler, job: Job, now: float) -> float:
    """When an active job is expected to end: `now` plus as long again as it has run so far
    (with heavy-tailed runtimes, as GPU clusters' are, a job that has run for t is as likely
    as not to run t more: one that has run for days is not expected to end within the hour,
    one that just started may well), or its runtime estimate's end if sooner and not passed
    (an estimate the job has outrun says nothing about when it ends). Never later than the
    first: the no-starvation bound rests on it (`DynamicPolicy._shadows`)."""
    start = job.started_at if job.started_at is not None else job.admitted_at
    lindy = INF if start is None else now + (now - start)
    end = s.projected_end(job)
    return end if now <= end < lindy else lindy


def node_share(gpus: int, nodes: int) -> int:
    """GPUs a job of `gpus` takes on each of `nodes` nodes, at most (rounded up)."""
    return -(-gpus // nodes)


def ready_time(s: Scheduler, node: str, need: int, end_of: Callable[[Job], float]) -> float:
    """When `node` will have `need` free GPUs if its jobs end at `end_of` (inf: unknown)."""
    free = s.cluster.free_on(node)
    if free >= need:
        return -INF
    jobs, ends = s.jobs, []
    for j in s.on_node.get(node, ()):
        job = jobs[j]
        alloc = job.allocation
        held = len(alloc[0][1]) if len(alloc) == 1 else sum(len(ids) for n, ids in alloc if n == node)
        ends.append((end_of(job), held))
    ends.sort()
    for end, gpus in ends:
        free += gpus
        if free >= need:
            return end
    return INF
