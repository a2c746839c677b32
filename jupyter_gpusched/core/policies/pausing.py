"""Pausing long runs at their checkpoints for jobs that have not run (`dynamic`'s rule 6;
docs/scheduling.md rule 8): which runs could be paused, the most room pausing could make, and
when the next run becomes pausable."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..model import Job
from ..queues import effective_priority

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler

INF = math.inf
# node -> the runs on it that could be paused, each with its class (`pause_candidates`)
PauseCandidates = dict[str, list[tuple[Job, int]]]
# A run is paused for a waiting job only this soon after its checkpoint: the work a pause may
# throw away (the driver's pass may come a little after the checkpoint is written).
PAUSE_GRACE_S = 300.0


def could_pause(s: Scheduler, v: Job, now: float) -> bool:
    """Could running `v` be paused for some job now (`DynamicPolicy._pause` says for which)?"""
    spec = v.spec
    return (
        v.started_at is not None
        and spec.preemptible
        and not spec.interactive
        and spec.checkpoint_interval is not None
        and now - v.started_at >= s.config.aging_interval
        and v.last_checkpoint_at is not None
        and now - v.last_checkpoint_at <= PAUSE_GRACE_S
    )


def pause_candidates(pausable: list[Job]) -> PauseCandidates:
    """Node -> the single-node runs on it that could be paused (`could_pause`), each with its
    class: built once a walk, as most walks that try a pause try several (a multi-node run
    frees room on several nodes; it is left alone)."""
    out: PauseCandidates = {}
    for v in pausable:
        if len(v.allocation) == 1:
            out.setdefault(v.allocation[0][0], []).append((v, int(effective_priority(v))))
    return out


def pause_room(s: Scheduler, pausable: list[Job]) -> dict[str | None, int]:
    """Tenant -> the most GPUs pausing could free on one node for its jobs (None: for a tenant
    with no pausable run of its own): free GPUs plus the single-node pausable runs there that are
    its own or borrowing. A bound on what `DynamicPolicy._pause` finds (it also asks the class,
    the pools and the excluded nodes): a job larger than it need not look. Starts within the walk
    only lower it."""
    base: dict[str, int] = {}  # node -> free + pausable borrowers there
    own: dict[tuple[str, str], int] = {}  # (node, tenant) -> its pausable runs there that do not borrow
    for v in pausable:
        if v.id not in s.active or len(v.allocation) != 1:
            continue
        node = v.allocation[0][0]
        if node not in base:
            base[node] = s.cluster.free_on(node)
        if v.borrowed:
            base[node] += v.gpus
        else:
            own[(node, v.tenant)] = own.get((node, v.tenant), 0) + v.gpus
    room: dict[str | None, int] = {None: max(base.values(), default=0)}
    for (node, tenant), gpus in own.items():
        room[tenant] = max(room.get(tenant, room[None]), base[node] + gpus)
    return room


def next_pause_wakeup(s: Scheduler, now: float) -> float | None:
    """The next checkpoint, a little after it is due (writing one takes time), of a run
    that could then be paused for a queued job: a borrower, or a run of a tenant with
    jobs in the queue."""
    if not s.config.pause_long_runs or not s.queue:
        return None
    aging = s.config.aging_interval
    queued = s.queue.has_tenant
    half_grace = PAUSE_GRACE_S / 2
    best = INF
    for v in s.active.values():  # (once a pass over every run: the cheap tests first)
        started = v.started_at
        if started is None:
            continue
        spec = v.spec
        interval = spec.checkpoint_interval
        if interval is None or not spec.preemptible or spec.interactive or not (v.borrowed or queued(spec.tenant)):
            continue
        earliest = started + aging
        last = v.last_checkpoint_at
        if last is not None and last >= earliest and now < last + half_grace:
            due = last  # pausable now: a pass soon (the driver may not run one at a checkpoint)
        else:
            due = (last if last is not None and last > started else started) + interval
            if due < earliest:
                due += math.ceil((earliest - due) / interval) * interval
        wake = due + half_grace
        if now < wake < best:
            best = wake
    return best if best < INF else None
