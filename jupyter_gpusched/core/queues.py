"""Queue order: priority classes with aging, and the ordered queue itself.

Aging as a fixed head start: a job of priority p is ordered as if it had been submitted
`p * aging_interval` seconds earlier than its real submit time. With LOW=0, NORMAL=1,
HIGH=2 this is exactly linear aging (a waiting job gains one class per interval), but the
key never changes while the job waits, so the queue is sorted once, not every pass.

The no-starvation bound follows: a job submitted at t is only ever ordered behind jobs
submitted before t + (HIGH - p) * aging_interval. The set of jobs ahead of it is finite
and closed, so it reaches the head of its queue; the head is then given a reservation
(see policies/dynamic.py), so it starts once the reserved node drains.
"""

from __future__ import annotations

import bisect
import copy
import heapq
import math
from collections.abc import Callable, Collection, Hashable, Iterator

from .model import Job, Priority

QueueKey = Callable[[Job], tuple]
QueueGroup = Callable[[Job], Hashable]


def effective_priority(job: Job) -> Priority:
    """The class a job is ordered by: the lowest while its tenant is over a soft budget."""
    return Priority.LOW if job.budget_demoted else job.spec.priority


def aged_key(aging_interval: float, short_first: bool = False) -> QueueKey:
    """Order by virtual submit time (priority head start; a paused run's `line_shift_s` counts
    its place from its pause), then submission order.

    With `short_first`, a job expected to run for less than one aging interval also gets the
    rest of that interval as a head start (`short_head_start`), within its class: among jobs
    submitted close together the expected-shorter go first, as shortest-expected-first
    would, while the no-starvation bound below stays exactly as it is."""
    top = int(Priority.HIGH) * aging_interval

    def key(job: Job) -> tuple:
        return (job.submitted_at + job.line_shift_s - int(effective_priority(job)) * aging_interval, job.seq)

    def short_key(job: Job) -> tuple:
        head = int(effective_priority(job)) * aging_interval + short_head_start(job, aging_interval)
        return (job.submitted_at + job.line_shift_s - min(top, head), job.seq)

    return short_key if short_first else key


def short_head_start(job: Job, aging_interval: float) -> float:
    """The head start a runtime estimate earns: what is left of one aging interval after the
    expected run (none without an estimate). Capped with the class's own head start at the
    top class's, so no job is ever ordered before one submitted more than the starvation
    bound earlier."""
    est = job.spec.runtime_estimate
    if est is None or not est < aging_interval:
        return 0.0
    return aging_interval - max(0.0, est)


def fifo_key(job: Job) -> tuple:
    return (job.submitted_at, job.seq)


def strict_priority_key(job: Job) -> tuple:
    return (-int(effective_priority(job)), job.submitted_at, job.seq)


def starvation_bound(priority: Priority, aging_interval: float) -> float:
    """How much later than a job of `priority` another job may be submitted and still go first."""
    return (int(Priority.HIGH) - int(priority)) * aging_interval


class JobQueue:
    """Queued jobs in a fixed key order. Removal is lazy; iteration skips stale entries.

    With `group`, the jobs are also kept in one ordered list per group (jobs a policy's pass
    treats alike), so that `walk` can set a whole group aside (see GroupedWalk)."""

    def __init__(self, key: QueueKey, group: QueueGroup | None = None):
        self.key = key
        self.group = group
        self._groups: dict[Hashable, list[tuple[tuple, int, Job]]] = {}
        self._group_of: dict[str, Hashable] = {}  # job id -> its group when queued
        self._entry: dict[str, tuple[tuple, int, Job]] = {}  # job id -> its live entry
        self._entries: list[tuple[tuple, int, Job]] = []
        self._token: dict[str, int] = {}  # job id -> token of its live entry
        self._next_token = 0
        self._walks = 0  # iterations in progress: a push copies the list rather than change theirs
        self._tenants: dict[str, int] = {}  # tenant -> queued jobs
        self._kinds: dict[tuple[str, int, bool], int] = {}  # (tenant, GPUs, preemptible) -> queued jobs
        self._kind_of: dict[str, tuple[str, int, bool]] = {}
        # (the group lists, a heap of their heads) for GroupedWalk: kept until a group list
        # changes, so the walks of passes that started nothing do not build it again
        self._heads: tuple[list, list] | None = None

    def __deepcopy__(self, memo: dict) -> JobQueue:
        """A copy for core/lookahead.py's fork, built here: the generic deep copy would copy every
        entry's key tuple too (most of a fork's time with thousands queued). Keys, groups and
        counts are immutable values and shared; entries, lists and jobs are new, with the same
        sharing between `_entries`, `_entry`, the group lists and `_heads` as here."""
        new = JobQueue.__new__(JobQueue)
        memo[id(self)] = new
        made: dict[int, tuple[tuple, int, Job]] = {}

        def entry(e: tuple[tuple, int, Job]) -> tuple[tuple, int, Job]:
            got = made.get(id(e))
            if got is None:
                got = made[id(e)] = (e[0], e[1], copy.deepcopy(e[2], memo))
            return got

        lists: dict[int, list] = {}

        def members(old: list) -> list:
            got = lists.get(id(old))
            if got is None:
                got = lists[id(old)] = [entry(e) for e in old]
            return got

        new.key, new.group = self.key, self.group
        new._groups = {g: members(m) for g, m in self._groups.items()}
        new._group_of = dict(self._group_of)
        new._entry = {job_id: entry(e) for job_id, e in self._entry.items()}
        new._entries = members(self._entries)
        new._token = dict(self._token)
        new._next_token = self._next_token
        new._walks = self._walks
        new._tenants = dict(self._tenants)
        new._kinds = dict(self._kinds)
        new._kind_of = dict(self._kind_of)
        if self._heads is None:
            new._heads = None
        else:
            heads, heap = self._heads
            new._heads = ([members(m) for m in heads], [(entry(e), gi, i) for e, gi, i in heap])
        return new

    def __len__(self) -> int:
        return len(self._token)

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._token

    def push(self, job: Job) -> None:
        if job.id in self._token:
            raise ValueError(f"job {job.id} is already queued")
        token = self._next_token
        self._next_token += 1
        self._token[job.id] = token
        spec = job.spec
        tenant = spec.tenant
        kind = self._kind_of[job.id] = (tenant, spec.gpus, spec.preemptible)
        self._kinds[kind] = self._kinds.get(kind, 0) + 1
        self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        if self._walks:
            self._entries = list(self._entries)
        # tokens are unique, so tuple comparison never reaches the Job
        entry = (self.key(job), token, job)
        bisect.insort(self._entries, entry)
        self._entry[job.id] = entry
        if self.group is not None:
            g = self._group_of[job.id] = self.group(job)
            self._heads = None
            members = self._groups.get(g)
            if members is None:
                self._groups[g] = [entry]
            else:
                if self._walks:  # a walk holds this list: change a copy
                    members = self._groups[g] = list(members)
                bisect.insort(members, entry)

    def remove(self, job_id: str) -> None:
        token = self._token.pop(job_id, None)
        if token is None:
            return
        kind = self._kind_of.pop(job_id)
        if self._kinds[kind] > 1:
            self._kinds[kind] -= 1
        else:
            del self._kinds[kind]
        tenant = kind[0]
        left = self._tenants[tenant] - 1
        if left:
            self._tenants[tenant] = left
        else:
            del self._tenants[tenant]
        del self._entry[job_id]
        entries = self._entries
        if entries[0][1] == token:
            # The head left (a start, usually): drop the stale entries that lead the list now, or
            # every walk would skip them one by one (fifo at 70k jobs: 350 M lookups of gone jobs).
            k = self._first_live(entries)
            if self._walks:  # a walk holds this list: it keeps its own
                self._entries = entries[k:]
            else:
                del entries[:k]
        if self.group is not None:
            g = self._group_of.pop(job_id)
            members = self._groups[g]
            if members[0][1] == token:  # its group's head: drop the stale entries that lead it
                self._heads = None
                k = self._first_live(members)
                if k < len(members):
                    self._groups[g] = members[k:]  # a new list: a walk in progress keeps its own
                else:
                    del self._groups[g]
        if len(self._entries) > 64 and len(self._entries) > 2 * len(self._token):
            self._entries = [e for e in self._entries if self._token.get(e[2].id) == e[1]]
            if self.group is not None:  # new lists: a walk in progress keeps its own
                groups: dict[Hashable, list[tuple[tuple, int, Job]]] = {}
                for e in self._entries:
                    groups.setdefault(self._group_of[e[2].id], []).append(e)
                self._groups = groups
                self._heads = None

    def _walk_heads(self) -> tuple[list, list]:
        """The group lists and a heap of (head entry, group index, 0), for GroupedWalk (shared:
        a walk copies the heap)."""
        if self._heads is None:
            lists = list(self._groups.values())
            heap = [(members[0], gi, 0) for gi, members in enumerate(lists)]
            heapq.heapify(heap)
            self._heads = (lists, heap)
        return self._heads

    def _first_live(self, entries: list[tuple[tuple, int, Job]]) -> int:
        """Index of the first queued job's entry after a departed head (len(entries) if none)."""
        live = self._token.get
        k = 1
        while k < len(entries) and live(entries[k][2].id) != entries[k][1]:
            k += 1
        return k

    def regroup(self, job: Job) -> None:
        """A queued job's spec changed (a learned runtime estimate): file it under its new group,
        and at its new place where the key reads the estimate (short_first)."""
        entry = self._entry.get(job.id)
        if entry is None:
            return
        if self.key(job) != entry[0] or (self.group is not None and self.group(job) != self._group_of[job.id]):
            self.remove(job.id)
            self.push(job)

    def walk(self, always: Collection[str] = ()) -> GroupedWalk | PlainWalk:
        """A walk of the queue in order that lets the walker set groups aside (a plain
        walk, setting nothing aside, when the queue is not grouped)."""
        return PlainWalk(self) if self.group is None else GroupedWalk(self, always)

    def tenants(self) -> int:
        """How many tenants have jobs queued."""
        return len(self._tenants)

    def kinds(self) -> dict[tuple[str, int, bool], int]:
        """(tenant, GPUs, preemptible) -> how many such jobs are queued, kept as jobs come and go:
        a pass can read the queue's demand without walking it. A copy."""
        return dict(self._kinds)

    def has_tenant(self, tenant: str) -> bool:
        """Has `tenant` a job queued?"""
        return tenant in self._tenants

    def __iter__(self) -> Iterator[Job]:
        """Jobs in order, as queued when the walk began. Safe to push and remove jobs while
        iterating: those change a copy (no O(queue) copy per walk that stops early)."""
        live = self._token.get
        entries = self._entries
        self._walks += 1
        try:
            for _, t, job in entries:
                if live(job.id) == t:
                    yield job
        finally:
            self._walks -= 1

    def position(self, job_id: str) -> int | None:
        """0-based place in line, or None if not queued."""
        if job_id not in self._token:
            return None
        for i, job in enumerate(self):
            if job.id == job_id:
                return i
        return None  # pragma: no cover - token and entries agree by construction


class PlainWalk:
    """Every queued job in order; `set_aside` and `changed` do nothing (the reference walk)."""

    def __init__(self, queue: JobQueue):
        self._queue = queue

    def __iter__(self) -> Iterator[Job]:
        return iter(self._queue)

    def set_aside(self, for_pass: bool = False) -> None:
        pass

    def set_aside_tenant(self, tenant: str) -> None:
        pass

    def set_aside_larger(self, gpus: int, unestimated: int | None = None) -> None:
        pass

    def changed(self, tenant: str | None = None) -> None:
        pass


class GroupedWalk:
    """The jobs of a grouped JobQueue in order, as queued when the walk began, merged from
    the per-group lists, visiting only what the walker may act on.

    After a job is yielded the walker may call `set_aside()`: its visit changed nothing, and
    the next jobs of its group, visited with nothing changed, would do just the same; they
    are not yielded until the walker calls `changed()` (then the walk resumes those groups
    after the current job); `changed(tenant)`: what changed concerns only that tenant's jobs
    (a start charges only its own tenant's quota), so only its groups resume (for a queue
    whose groups each hold one tenant's jobs). `set_aside(for_pass=True)`: they could do
    nothing for the rest of this walk whatever changes. Jobs in `always` (the ones whose visit depends on the
    job itself, not only its group) are yielded whatever their group's state. So a walk
    costs the jobs it yields plus, per change, a binary search per set-aside group, not
    the length of the queue."""

    def __init__(self, queue: JobQueue, always: Collection[str] = ()):
        self._queue = queue
        lists, heads = queue._walk_heads()
        self._lists = lists  # snapshots: a push or a head's removal during the walk makes new lists
        self._always = frozenset(j for j in always if j in queue._entry)
        self._heap: list[tuple[tuple[tuple, int, Job], int, int]] = list(heads)
        for j in self._always:
            heapq.heappush(self._heap, (queue._entry[j], -1, 0))
        self._dead: dict[str, list[tuple[int, int]]] = {}  # tenant -> (group, next index) set aside until a change
        self._tenants_aside: set[str] = set()  # every group of these set aside for the walk
        self._gpus_aside = math.inf  # and every group of jobs larger than this
        self._unestimated_aside = math.inf  # and of jobs with no runtime estimate larger than this
        self._aside = 0  # 1: set aside until a change, 2: for the walk
        self._changed: set[str] | bool = False  # True: everything; a set: those tenants' groups

    def set_aside(self, for_pass: bool = False) -> None:
        self._aside = 2 if for_pass else max(self._aside, 1)

    def changed(self, tenant: str | None = None) -> None:
        if tenant is None:
            self._changed = True
        elif self._changed is False:
            self._changed = {tenant}
        elif self._changed is not True:
            self._changed.add(tenant)

    def set_aside_tenant(self, tenant: str) -> None:
        """Set aside, for the rest of the walk, every group of `tenant`'s jobs (those in `always`
        are still yielded): cheaper than visiting each group to set it aside. Only for a queue
        whose groups each hold one tenant's jobs (`tenant_group`, `dynamic_group`)."""
        self._tenants_aside.add(tenant)
        if self._queue._tenants.keys() <= self._tenants_aside:  # all of them: only `always` is left
            self._heap[:] = [item for item in self._heap if item[1] < 0]
            heapq.heapify(self._heap)
            self._dead.clear()

    def set_aside_larger(self, gpus: int, unestimated: int | None = None) -> None:
        """Set aside, for the rest of the walk, every group of jobs of more than `gpus` GPUs, and of
        jobs with no runtime estimate of more than `unestimated` (those in `always` are still
        yielded). Only for a queue whose groups each hold jobs of one size and alike estimates
        (`dynamic_group`)."""
        self._gpus_aside = min(self._gpus_aside, gpus)
        self._unestimated_aside = min(
            self._gpus_aside, self._unestimated_aside, gpus if unestimated is None else unestimated
        )

    def __iter__(self) -> Iterator[Job]:
        queue, heap, lists, always, dead = self._queue, self._heap, self._lists, self._always, self._dead
        tenants_aside = self._tenants_aside
        live = queue._token.get
        push, pop = heapq.heappush, heapq.heappop
        queue._walks += 1
        try:
            while heap:
                entry, gi, i = pop(heap)
                job = entry[2]
                members = lists[gi] if gi >= 0 else None
                spec = job.spec
                gpus = spec.gpus
                if members is not None and (  # its whole group (one tenant's jobs, of one size and estimate)
                    # (the unestimated bound is never above the other)
                    gpus > self._unestimated_aside
                    and (gpus > self._gpus_aside or spec.runtime_estimate is None)
                    or tenants_aside
                    and spec.tenant in tenants_aside
                ):
                    continue
                if members is not None and job.id in always or live(job.id) != entry[1]:
                    if members is not None and i + 1 < len(members):
                        push(heap, (members[i + 1], gi, i + 1))
                    continue
                self._aside, self._changed = 0, False
                yield job
                if members is not None:
                    if self._aside == 1:
                        tenant = job.spec.tenant
                        if tenant in dead:
                            dead[tenant].append((gi, i + 1))
                        else:
                            dead[tenant] = [(gi, i + 1)]
                    elif not self._aside and i + 1 < len(members):
                        push(heap, (members[i + 1], gi, i + 1))
                changed = self._changed
                if changed and dead:
                    for tenant in list(dead) if changed is True else changed & dead.keys():
                        for gj, j in dead.pop(tenant):
                            members = lists[gj]
                            j = bisect.bisect_right(members, entry, lo=j)
                            if j < len(members):
                                push(heap, (members[j], gj, j))
        finally:
            queue._walks -= 1


class TenantLine:
    """Each tenant's line during one pass: which of its jobs were left waiting, and why, so
    that a later job of the same tenant does not pass them against the aging order.

    Within a tenant a job may be passed by a younger one only when the older one cannot
    start for a reason the younger does not share. Two reasons are kept:
    - `hold(tenant)`: the tenant's head waits for the tenant's own quota to drain; all its
      later jobs wait behind it (in `dynamic`'s quota walk they take their turn later);
    - `wait(tenant, gpus, pools, exclude)`: a job of `gpus` waits for room on the nodes of
      `pools` outside `exclude`. A later job of at least as many GPUs whose nodes are among
      those shares the reason: whatever would free room for it frees room for the older one
      first (`may_pass` says no).
    """

    def __init__(self) -> None:
        self._held: set[str] = set()
        # tenant -> {(pools, excluded nodes): smallest waiting job}
        self._waiting: dict[str, dict[tuple[frozenset[str], frozenset[str]], int]] = {}

    def hold(self, tenant: str) -> None:
        self._held.add(tenant)

    def held(self, tenant: str) -> bool:
        return tenant in self._held

    def held_tenants(self) -> set[str]:
        return set(self._held)

    def wait(self, tenant: str, gpus: int, pools: frozenset[str], exclude: frozenset[str]) -> None:
        waits = self._waiting.setdefault(tenant, {})
        key = (pools, exclude)
        if gpus < waits.get(key, gpus + 1):
            waits[key] = gpus

    def may_pass(self, tenant: str, gpus: int, pools: frozenset[str], exclude: frozenset[str]) -> bool:
        """May a job of `tenant` be started by means beyond plain placement (making room
        for it) while the tenant's older jobs wait? Not while one of them, no larger, waits
        for room on nodes that include all of this job's, nor while the tenant is held."""
        if tenant in self._held:
            return False
        for (p, e), g in self._waiting.get(tenant, {}).items():
            if g <= gpus and pools <= p and e <= exclude:
                return False
        return True
