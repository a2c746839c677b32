"""`dynamic`: priority with aging, per-tenant quota + burst with reclaim, and backfill.

One pass walks the queue in aged order (queues.aged_key), twice: first for jobs within
their tenant's quota, then for jobs that would borrow. (The comments' "rule N" is the
numbering of docs/scheduling.md, which explains each rule at length.)
1. a job whose tenant is at its quota + burst waits (its tenant's larger jobs too);
   a job that fits its tenant's quota but must wait for its tenant's running jobs to
   free it is not passed, in the quota walk, by that tenant's later jobs; those take
   their turn in the borrow walk, in aged order, before the tenant's later borrowers;
2. otherwise it is placed best-fit, borrowing idle GPUs if past its quota;
3. if it does not fit but is within its quota, borrowers of other tenants are preempted
   to make room on one node (least work lost first);
4. else the first such blocked job gets a reservation: the node(s) that will have room
   for it soonest. Once those nodes are expected to drain within one aging interval, or
   within as long as the reservation has waited, whichever is longer (`expected_end`), the
   reservation holds them until its job starts: later jobs may not use a held node unless
   their runtime estimate says they end before the reserved job could start there (EASY
   backfill). The reservation bounds how long a large job can be passed by small ones,
   without idling GPUs for a drain days away.
5. a job larger than its tenant's whole quota can only borrow: it gets no reservation and
   does not start while another tenant's within-quota job waits (it would be reclaimed at
   once); it runs in the windows the quota holders leave free, until it has waited
   `oversize_grant_after`: then, one such job at a time, it runs as if within quota
   (`_granted`; docs/scheduling.md rule 7).
6. a batch job that has never run and does not fit may pause, right after their checkpoint,
   preemptible runs of its own tenant (or borrowers), not of a higher class, that have run one
   aging interval since they (re)started; a paused run's place in line counts from its pause
   (least-attained service within quotas and classes; docs/scheduling.md rule 8).
"""

from __future__ import annotations

import copy
import enum
import math
from functools import partial
from typing import TYPE_CHECKING

from ..model import Job, attained_now, work_at_risk
from ..queues import TenantLine, aged_key, effective_priority
from ..quotas import Admission
from . import pausing
from .base import Policy
from .drain import expected_end, node_share, ready_time
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler

INF = math.inf


class _Again(enum.Enum):
    """Why a walk starts again (`_walk_once`)."""

    RESERVATION = "a reservation let go of nodes that earlier jobs were kept off"
    PAUSE = "a pause freed more than its job took: jobs before it may take the rest"


_NO_EXCLUDED_MEMO: tuple = (None, None, frozenset(), {})


@register("dynamic")
class DynamicPolicy(Policy):
    def __deepcopy__(self, memo: dict) -> DynamicPolicy:
        """A copy (core/lookahead.py's fork) leaves out the memo of excluded nodes: it is rebuilt at
        the copy's first pass, and copying its thousands of node sets was a third of a fork."""
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        for name, value in self.__dict__.items():
            setattr(new, name, _NO_EXCLUDED_MEMO if name == "_excluded_memo" else copy.deepcopy(value, memo))
        return new

    def __init__(self) -> None:
        self._reservations: dict[str, tuple[str, ...]] = {}  # queued job id -> nodes held for it
        self._shadow: dict[str, tuple[str, float]] = {}
        self._made: dict[str, float] = {}  # reservation owner -> when it was made
        self._holding: set[str] = set()  # reservations holding their nodes: once they do, until they end
        # (shadow, now, its owners, {estimate: excluded nodes}): for jobs owning no reservation
        # the answer depends only on the estimate, so a pass computes it once per estimate
        self._excluded_memo: tuple = _NO_EXCLUDED_MEMO
        self._blocked_new: dict[str, int] = {}
        # tenant -> (size, interactive) -> Admission: most visits only classify a job and move on, so
        # a verdict is kept for the pass until a usage changes (a start clears its tenant's, a
        # reclaim or pause all)
        self._verdicts: dict[str, dict[tuple[int, bool], Admission]] = {}
        self._pass_pausable: list[Job] = []
        # the job granted a within-quota run past its tenant's quota in this pass (rule 7): None
        # until a due job asks, "" when a granted run still holds the grant
        self._grant_to: str | None = None
        # the granted job's reservation: its own, beside the `max_reservations` of the others
        # (they would otherwise wait behind a grant's drain; rule 7)
        self._grant_owner: str | None = None

    def queue_key(self, config):
        return aged_key(config.aging_interval, config.short_first)

    def queue_group(self):
        return dynamic_group

    @property
    def reservations(self) -> dict[str, tuple[str, ...]]:
        return dict(self._reservations)

    def schedule(self, s: Scheduler, now: float) -> None:
        cluster = s.cluster
        self._reservations = {
            jid: nodes
            for jid, nodes in self._reservations.items()
            if jid in s.queue and all(n in cluster for n in nodes)
        }
        self._holding &= set(self._reservations)
        self._made = {jid: t for jid, t in self._made.items() if jid in self._reservations}
        self._shadow = self._shadows(s, now)  # reserved node -> (owner job id, earliest start there)
        self._blocked_new = {}  # tenant -> smallest of its unstarted jobs left waiting
        self._verdicts = {}
        self._grant_to = None
        # runs that could be paused in this pass: no run started within it can be (it pauses
        # only after an aging interval), so each walk re-checks just these
        self._pass_pausable = (
            [
                v
                for v in s.active.values()
                # (most runs are not within a pause's grace of a checkpoint: that test first, inline)
                if v.last_checkpoint_at is not None
                and now - v.last_checkpoint_at <= pausing.PAUSE_GRACE_S
                and pausing.could_pause(s, v, now)
            ]
            if s.config.pause_long_runs
            else []
        )
        # Guaranteed shares first, then burst: a job that must borrow is only considered
        # after every job within its quota, so a pass never lends GPUs it reclaims at once.
        quota_waiting, owners_waiting = self._walk(s, now, Admission.WITHIN_QUOTA, set(), set())
        self._walk(s, now, Admission.BORROW, quota_waiting, owners_waiting)

    def _walk(
        self, s: Scheduler, now: float, phase: Admission, quota_waiting: set[str], owners_waiting: set[str]
    ) -> tuple[set[str], set[str]]:
        """One walk of the queue. The quota walk returns, for the borrow walk, the tenants
        whose older job waits for their own quota (their later within-quota jobs were held
        back) and the tenants whose within-quota jobs were left waiting for GPUs (they would
        reclaim what is lent now).

        A reservation released during the walk (its owner started, or went over its limit)
        frees nodes that jobs earlier in the walk were kept off: the walk then starts again,
        so those take the nodes in their turn rather than the jobs after them (issue 12's
        aging order; a few times at most). So does a pause that frees more GPUs than its job
        takes: the rest go to the jobs before it first."""
        tries = s.config.max_reservations + 2  # (+1: the grant's own, rule 7)
        while True:
            waiting = set(owners_waiting)
            out = self._walk_once(s, now, phase, quota_waiting, waiting, may_restart=tries > 0)
            if out is _Again.RESERVATION:
                tries -= 1
            elif out is not _Again.PAUSE:  # a pause restart needs no bound: it started a job, and
                owners_waiting |= out[1]  # no run started in this pass may be paused, so they end
                return out[0], owners_waiting

    def _walk_once(
        self,
        s: Scheduler,
        now: float,
        phase: Admission,
        quota_waiting: set[str],
        owners_waiting: set[str],
        may_restart: bool,
    ) -> tuple[set[str], set[str]] | _Again:
        """`_walk`'s one try, or why it must start again."""
        cluster = s.cluster
        kept_off = False  # a job was refused placement while nodes were held for another
        capacity_failed: dict[tuple, int] = {}  # (pools, excluded) -> smallest job that did not fit
        tenant_blocked: dict[tuple[str, bool], float] = {}  # (tenant, interactive) -> smallest job over its limit
        line = TenantLine()  # held: tenants whose older job waits for their own quota to drain
        reclaim_failed = INF
        pause_failed: dict[tuple[str, int], int] = {}  # (tenant, class) -> smallest job no pause made room for
        pause_room: dict[str | None, int] | None = None  # `pausing.pause_room`, until a reclaim or pause frees GPUs
        pause_candidates: pausing.PauseCandidates | None = None  # `pausing.pause_candidates`, once asked
        # the pass's pausable runs that no walk has paused yet (one paused, or reclaimed, is gone
        # or back in line, and in this pass cannot start: `could_pause` holds while it has a start)
        pausable = [v for v in self._pass_pausable if v.started_at is not None and v.id in s.active]
        borrow_phase = phase is Admission.BORROW
        if not pausable and _full(s, borrow_phase, reclaim_failed):
            return set(), owners_waiting  # the walk would stop at its first job (see the loop)
        verdicts = self._verdicts
        usable_free: dict[tuple, int] = {}  # (preemptible, gpu type) -> free GPUs it may use
        classify = s.ledger.classify
        quota_holders = {name for name, t in s.ledger.tenants.items() if t.quota > 0}
        terms: dict[str, tuple[int, bool]] = {}  # tenant -> (quota, another tenant holds a quota)
        # The queue is grouped by what a visit reads of a job (queue_group): a job whose visit
        # changes nothing sets its group aside until something changes (walk.changed), so a
        # pass visits only the jobs that could act, not the whole queue (issue 12, fault 8).
        # Only reservation owners are visited whatever their group does.
        walk = s.queue.walk(always=self._reservations)
        full, stale = False, True  # `_full`, recomputed only after what can change it (stale)
        # A borrow walk with no reservation to give (all are given) does nothing for a job
        # larger than both the free GPUs and the room pausing could make (`pausing.pause_room`): there
        # is no reclaim here, and starts and pauses only lower both. Once every reservation
        # owner has been visited (an owner's visit may let go of its reservation, and reads
        # what the jobs before it did), such jobs are not visited.
        size_aside = False
        owners_left = None

        def startable() -> tuple[int, int]:
            """The largest job the borrow walk could still start or pause for; and the largest
            with no runtime estimate, which may not use a held node (`_excluded`)."""
            nonlocal pause_room
            room = 0
            if pausable:
                if pause_room is None:
                    pause_room = pausing.pause_room(s, pausable)
                room = max(pause_room.values())
            return max(cluster.largest_placeable(), room), max(cluster.largest_placeable(self._shadow), room)

        if borrow_phase and self._slots_taken(s):
            owners_left = {jid for jid in self._reservations if jid in s.queue}
        for job in walk:
            if owners_left:
                owners_left.discard(job.id)
            elif owners_left is not None:  # the last owner was visited before this job
                owners_left = None
                if self._slots_taken(s):
                    size_aside = True
                    walk.set_aside_larger(*startable())
            # Nothing left to place or reclaim: only a pause could start a job (the walk goes on
            # for that alone, and does nothing else a full cluster's walk would not have done).
            if stale:
                full, stale = _full(s, borrow_phase, reclaim_failed), False
            if full and not pausable:
                break
            spec = job.spec
            g, tenant, interactive = spec.gpus, spec.tenant, spec.interactive
            # an interactive request over its tenant's interactive cap blocks only the tenant's other
            # ones; a held tenant's groups are set aside (only its reservation owners come here)
            if g >= tenant_blocked.get((tenant, interactive), INF) or line.held(tenant):
                walk.set_aside(for_pass=True)  # neither is undone within a walk
                continue
            tenant_verdicts = verdicts.get(tenant) or verdicts.setdefault(tenant, {})
            admission = tenant_verdicts.get((g, interactive))
            if admission is None:
                admission = tenant_verdicts[(g, interactive)] = classify(tenant, g, interactive)
            if admission is Admission.OVER_LIMIT:
                tenant_blocked[(tenant, interactive)] = g
                if not interactive:  # past its limit: past its (smaller) interactive limit too
                    tenant_blocked[(tenant, True)] = min(g, tenant_blocked.get((tenant, True), INF))
                walk.set_aside(for_pass=True)
                if self._reservations.pop(job.id, None):
                    self._shadow = self._shadows(s, now)
                    walk.changed()
                    if kept_off and may_restart:
                        return _Again.RESERVATION
                continue
            # A job past its tenant's whole quota can only borrow, and other tenants' quota
            # jobs may take its GPUs back whenever they come (the livelock of issue 12), until it
            # has waited long enough to be granted a within-quota run (rule 7).
            quota, others_hold = terms.get(tenant) or terms.setdefault(
                tenant, (s.ledger.tenant(tenant).quota, bool(quota_holders - {tenant}))
            )
            beyond_quota = g > quota and others_hold
            granted = beyond_quota and admission is Admission.BORROW and quota > 0 and self._granted(s, job, now)
            if granted:
                admission, beyond_quota = Admission.WITHIN_QUOTA, False
            if admission is not phase and not (
                # held back in the quota walk behind its tenant's quota waiter: it takes its
                # turn here, in aged order, so its tenant's later borrowers do not pass it
                borrow_phase and admission is Admission.WITHIN_QUOTA and tenant in quota_waiting
            ):
                if phase is Admission.WITHIN_QUOTA and g <= s.ledger.tenant(tenant).quota:
                    # It must borrow only because its own tenant's running jobs hold the quota.
                    # Its tenant's newer jobs may not take that quota first: a stream of small
                    # ones would pass it forever, whatever aging says (see the rules above).
                    line.hold(tenant)
                    walk.set_aside_tenant(tenant)
                walk.set_aside()  # until a start or reclaim changes its verdict
                continue
            if beyond_quota and (len(owners_waiting) > 1 or (owners_waiting and tenant not in owners_waiting)):
                walk.set_aside(for_pass=True)  # owners_waiting only grows within a walk
                continue  # it can only borrow, and would be reclaimed at once: wait for a free window
            # Free GPUs in the pools this kind of job may use: when there are too few, skip
            # placement outright (a long queue facing only unusable free GPUs stays cheap).
            usable_key = (spec.preemptible, spec.gpu_type)
            free_here = usable_free.get(usable_key)
            if free_here is None:
                free_here = usable_free[usable_key] = s.free_gpus_for(spec)
            alloc = None
            exclude = None
            if g <= free_here:
                exclude = self._excluded(job, now)
                key = (spec.preemptible, spec.gpu_type, exclude)
                if g < capacity_failed.get(key, INF):
                    alloc = s.place(job, exclude)
                    if alloc is None:
                        capacity_failed[key] = g
            if alloc is None and phase is Admission.WITHIN_QUOTA and g < reclaim_failed and s.borrowers:
                if exclude is None:
                    exclude = self._excluded(job, now)
                stale = True
                if self._reclaim(s, job, now, exclude):
                    walk.changed()
                    verdicts.clear()
                    usable_free.clear()
                    capacity_failed.clear()
                    pause_room = None
                    alloc = s.place(job, exclude)
                else:
                    reclaim_failed = g
            paused = False
            if alloc is None and pausable and self._may_pause_for(job, pause_failed):
                if pause_room is None:
                    pause_room = pausing.pause_room(s, pausable)
                if g <= pause_room.get(tenant, pause_room[None]):
                    # (kept off held nodes, `kept_off` below, counts placements and reclaims only)
                    pause_exclude = self._excluded(job, now) if exclude is None else exclude
                    if pause_candidates is None:
                        pause_candidates = pausing.pause_candidates(pausable)
                    paused = self._pause(s, job, now, pause_exclude, pause_candidates)
                if paused:
                    stale = True
                    walk.changed()
                    verdicts.clear()
                    usable_free.clear()
                    capacity_failed.clear()
                    pause_room = None
                    alloc = s.place(job, pause_exclude)
                    # the paused run was its own tenant's: it may now be within quota
                    admission = Admission.WITHIN_QUOTA if granted else classify(tenant, g, interactive)
                else:
                    pause_failed[(tenant, int(effective_priority(job)))] = g
            if alloc is not None:
                reason = "admitted"
                if granted:  # (rule 7)
                    waited = (now - job.submitted_at) / 3600
                    reason = f"admitted past tenant {tenant!r}'s quota of {quota} GPUs after waiting {waited:.1f} h"
                s.admit(job, alloc, borrowed=admission is Admission.BORROW, now=now, reason=reason)
                stale = True
                # A start takes GPUs, so it lets no waiting job start that could not before; it
                # changes only its own tenant's verdicts (quota used), so only that tenant's jobs
                # set aside may now fare otherwise, unless it lets go of a reservation.
                verdicts.pop(tenant, None)
                usable_free.clear()
                if self._reservations.pop(job.id, None):
                    self._shadow = self._shadows(s, now)
                    walk.changed()
                    if kept_off and may_restart:
                        return _Again.RESERVATION
                else:
                    walk.changed(tenant)
                if size_aside:
                    walk.set_aside_larger(*startable())
                if paused and cluster.free_gpus:
                    # the rest of what it freed goes to the jobs before it first (aging order), the
                    # ones a grouped walk did not visit this pass too
                    return _Again.PAUSE
                continue
            # What is left only makes later visits do less (a failed placement or reclaim, a
            # waiting owner), except a new reservation: the next jobs of this group would find
            # just the same, so the group waits for a change that could let them do more.
            walk.set_aside()
            if job.first_started_at is None and g < self._blocked_new.get(tenant, INF):
                self._blocked_new[tenant] = g
            if full:
                continue
            kept_off = kept_off or bool(exclude)
            if not borrow_phase:
                owners_waiting.add(tenant)
            if (
                not beyond_quota
                and job.id not in self._reservations
                and (not self._slots_taken(s) or (granted and s.config.max_reservations > 0))
            ):
                nodes = self._choose_nodes(s, job)
                if nodes:
                    self._reservations[job.id] = nodes
                    self._made[job.id] = now
                    if granted:
                        self._grant_owner = job.id
                    self._shadow = self._shadows(s, now)
                    walk.changed()
        return line.held_tenants(), owners_waiting

    def _slots_taken(self, s: Scheduler) -> bool:
        """Are all `max_reservations` given (a grant's own reservation aside)?"""
        mine = self._grant_owner in self._reservations
        return len(self._reservations) - mine >= s.config.max_reservations

    def _granted(self, s: Scheduler, job: Job, now: float) -> bool:
        """May `job`, larger than its tenant's whole quota, run as if within it (rule 7)? Once it
        has waited `oversize_grant_after`, and if no such run holds the grant now: one at a time,
        the first due job a pass visits (the oldest, in aged order), or the one holding the
        grant's reservation."""
        after = s.config.oversize_grant_after
        if after is None or now - job.submitted_at < after:
            return False
        if self._grant_to is None:
            if self._grant_owner in self._reservations:  # it keeps the grant it reserved with
                self._grant_to = self._grant_owner
            else:
                quota = s.ledger.tenant
                held = any(not v.borrowed and v.gpus > quota(v.tenant).quota for v in s.active.values())
                self._grant_to = "" if held else job.id
        return self._grant_to == job.id

    # --- backfill reservations --------------------------------------------------------
    def _excluded(self, job: Job, now: float) -> frozenset[str]:
        shadow = self._shadow
        if not shadow:
            return frozenset()
        est = job.spec.runtime_estimate
        memo_shadow, memo_now, owners, memo = self._excluded_memo
        if memo_shadow is not shadow or memo_now != now:
            owners = {owner for owner, _ in shadow.values()}
            memo = {}
            self._excluded_memo = (shadow, now, owners, memo)
        owns = job.id in owners
        if not owns:  # the answer depends only on the estimate: memoised while shadow and now stand
            hit = memo.get(est)
            if hit is not None:
                return hit
        if est is None:  # no estimate: it may not backfill anywhere, even before an unknown (inf) start
            out = frozenset(n for n, (owner, _) in shadow.items() if owner != job.id)
        else:
            end = now + est
            out = frozenset(n for n, (owner, start) in shadow.items() if owner != job.id and end > start)
        if not owns:
            memo[est] = out
        return out

    def _shadows(self, s: Scheduler, now: float) -> dict[str, tuple[str, float]]:
        """Reserved node -> (owner, its projected start there, from runtime estimates), for
        the reservations that hold their nodes.

        A reservation holds its nodes once they are expected to drain (`expected_end`)
        within one aging interval or within as long as the reservation has waited already,
        whichever is longer, and then until its job starts or leaves. Before that its nodes
        stay open to every job: GPUs held idle for a drain days away cost more than the wait
        they save (issue 12, alibaba-loaded: 7 GPUs idle for 30 h behind one pod while 157
        jobs queued). The wait term bounds the open time: the jobs on its nodes that started
        after the reservation was made have run less than it has waited, so are expected to
        end within that wait; once those that were there before it have ended (within their
        max_runtime), it holds. Once held, always held: let go when the jobs there grow old,
        small jobs would refill the nodes and the drain would look near only while they are
        young (seed-3x8: a 4-GPU job waited 11 h that way)."""
        out: dict[str, tuple[str, float]] = {}
        expected = partial(expected_end, s, now=now)
        for jid, nodes in self._reservations.items():
            job = s.jobs[jid]
            need = {n: min(node_share(job.gpus, len(nodes)), s.cluster.capacity(n)) for n in nodes}
            if jid not in self._holding:
                patience = max(s.config.aging_interval, now - self._made[jid])
                if max(ready_time(s, n, k, expected) for n, k in need.items()) > now + patience:
                    continue
                self._holding.add(jid)
            start = max(ready_time(s, n, k, s.projected_end) for n, k in need.items())
            for n in nodes:
                out[n] = (jid, start)
        return out

    def _choose_nodes(self, s: Scheduler, job: Job) -> tuple[str, ...]:
        """The node(s) that will have room for `job` soonest (most free now breaks ties)."""
        held = {n for nodes in self._reservations.values() for n in nodes}
        pools = {p for group in s.pool_choices(job.spec) for p in group}
        g = job.gpus
        fits_one_node = g <= s.cluster.max_node_gpus(pools)
        ranked = []
        for order, n in enumerate(s.cluster.node_names):
            if n in held or s.cluster.pool_of(n) not in pools:
                continue
            cap = s.cluster.capacity(n)
            need = min(g, cap)
            if fits_one_node and cap < g:
                continue
            ranked.append((ready_time(s, n, need, s.projected_end), -s.cluster.free_on(n), order, n))
        ranked.sort()
        chosen, total = [], 0
        for _, _, _, n in ranked:
            chosen.append(n)
            total += s.cluster.capacity(n)
            if total >= g:
                return tuple(chosen)
        return ()

    # --- pausing long runs for jobs that have not started ------------------------------
    def _may_pause_for(self, job: Job, pause_failed: dict[tuple[str, int], int]) -> bool:
        """Only a batch job that has never run may pause another, and only if no older job of
        its tenant, as small or smaller, was left waiting earlier in this pass (it would pass
        that job: the aging order), nor one of its class and size found nothing to pause."""
        spec = job.spec
        if job.first_started_at is not None or spec.interactive:
            return False
        g = spec.gpus
        return g < min(
            self._blocked_new.get(spec.tenant, INF),
            pause_failed.get((spec.tenant, int(effective_priority(job))), INF),
        )

    def _pause(
        self, s: Scheduler, job: Job, now: float, exclude: frozenset[str], candidates: pausing.PauseCandidates
    ) -> bool:
        """Pause runs on the one node where that frees room for `job` with the fewest GPUs
        paused, the longest-served first. Least-attained service first, as Tiresias, but within
        the promises: a run may be paused for `job` if it is among this walk's `candidates`
        (`pausing.pause_candidates`: preemptible, has run one aging interval since it
        (re)started, so a paused job, resumed, always makes that much progress, and has just
        written a checkpoint, so the pause throws away at most `PAUSE_GRACE_S` of its work),
        still runs, is of `job`'s tenant or borrowing, and is not of a higher class."""
        g, tenant = job.gpus, job.tenant
        cls = int(effective_priority(job))
        pools = {p for group in s.pool_choices(job.spec) for p in group}
        cluster, active = s.cluster, s.active
        by_node: dict[str, list[Job]] = {}
        for node, runs in candidates.items():
            if node in exclude or cluster.pool_of(node) not in pools or cluster.capacity(node) < g:
                continue
            # (paused or reclaimed in this pass: gone, or back with no start, so not pausable)
            victims = [
                v
                for v, v_cls in runs
                if v_cls <= cls
                and (v.borrowed or v.tenant == tenant)
                and active.get(v.id) is v
                and v.started_at is not None
            ]
            if victims:
                by_node[node] = victims
        best = None
        for node, victims in by_node.items():
            free = s.cluster.free_on(node)
            victims.sort(key=lambda v: (-attained_now(v, now), v.seq))
            chosen = []
            for v in victims:
                if free >= g:
                    break
                chosen.append(v)
                free += v.gpus
            if free >= g:
                cost = (sum(v.gpus for v in chosen), -sum(attained_now(v, now) for v in chosen), node)
                if best is None or cost < best[0]:
                    best = (cost, chosen)
        if best is None:
            return False
        for v in best[1]:
            v.line_shift_s = now - v.submitted_at  # its place in line counts from the pause
            s.preempt(v.id, now, f"paused at its checkpoint for {job.id}, which has not run yet")
        return True

    def next_wakeup(self, s: Scheduler, now: float) -> float | None:
        return pausing.next_pause_wakeup(s, now)

    # --- reclaiming borrowed GPUs -----------------------------------------------------------
    def _reclaim(self, s: Scheduler, job: Job, now: float, exclude: frozenset[str]) -> bool:
        """Preempt borrowers of other tenants on the one node where that frees room for
        `job` at the least cost. Jobs larger than a node are not given reclaim."""
        g = job.gpus
        pools = {p for group in s.pool_choices(job.spec) for p in group}
        if g > s.cluster.max_node_gpus(pools):
            return False  # no node could hold it (before indexing every borrower by node)
        by_node: dict[str, list[Job]] = {}
        for b in s.borrowers.values():
            if b.tenant == job.tenant:
                continue
            for node, _ in b.allocation:
                by_node.setdefault(node, []).append(b)
        best = None
        for node, victims in by_node.items():
            if node in exclude or s.cluster.pool_of(node) not in pools or s.cluster.capacity(node) < g:
                continue
            free = s.cluster.free_on(node)
            victims.sort(key=lambda v: (work_at_risk(v, now), -v.seq))
            chosen, lost = [], 0.0
            for v in victims:
                if free >= g:
                    break
                chosen.append(v)
                free += sum(len(ids) for n, ids in v.allocation if n == node)
                lost += work_at_risk(v, now)
            if free >= g:
                cost = (sum(v.gpus for v in chosen), lost, node)
                if best is None or cost < best[0]:
                    best = (cost, chosen)
        if best is None:
            return False
        for v in best[1]:
            s.preempt(v.id, now, f"borrowed GPUs reclaimed for tenant {job.tenant!r}")
        return True


def _full(s: Scheduler, borrow_phase: bool, reclaim_failed: float) -> bool:
    """Nothing left to place or reclaim in this walk: no GPU free, and no borrower this walk may
    still take back (the quota walk reclaims until a reclaim for one GPU failed)."""
    return s.cluster.free_gpus == 0 and (borrow_phase or not s.borrowers or reclaim_failed <= 1)


def dynamic_group(job: Job) -> tuple:
    """Everything `_walk_once` reads of a job that is not its own reservation: jobs of one
    group, visited with nothing changed in between, fare alike (whether it has run and its
    class: what may pause a run, `_may_pause_for`)."""
    spec = job.spec
    return (spec.tenant, spec.gpus, spec.interactive, spec.preemptible, spec.gpu_type, spec.cpus, spec.memory,
            spec.runtime_estimate, job.first_started_at is None, effective_priority(job))  # fmt: skip
