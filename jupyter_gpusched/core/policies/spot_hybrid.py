"""`spot-hybrid`: `dynamic` on an on-demand base plus spot capacity bought as needed.

Everything `dynamic` does (aging, quota + burst with reclaim, backfill) but rule 7's grant
(`_granted`), plus:
1. Placement: preemptible jobs go to spot pools first; the others never do (the
   scheduler's `pool_choices` orders pools so).
2. Elastic spot: when preemptible jobs wait for GPUs, the spot pool is scaled out (a
   `Scale` decision, capped by the pool's `max_nodes`); a spot node idle for `idle_grace_s`
   is given back. Spot is paid only while it is held; the on-demand base never changes.
3. Keep on-demand for jobs that need it: when a job that may not run on spot waits for
   on-demand GPUs held by preemptible, checkpointing jobs, those are preempted (they resume
   on spot from their checkpoint) once spot has room for them -- asking for it if needed.
4. Checkpoint interval: a job placed on a spot node checkpoints at most every
   `safety` x the shortest node lifetime seen in that pool (the `prior_lifetime_s` stands
   in until one is seen), so an interruption costs it at most that one interval. The driver
   asks `checkpoint_interval` when it starts a job and passes the answer to its runner.

Node lifetimes and idle times are learnt from the cluster itself, in caches the policy
can rebuild: when a spot node first appears and when it is taken away. A node the driver
retires on the policy's own scale-in is no interruption and teaches nothing about lifetimes
(counting those once made it checkpoint every minute).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..model import Job, work_at_risk
from ..queues import TenantLine
from ..quotas import Admission
from .dynamic import DynamicPolicy
from .registry import register

if TYPE_CHECKING:  # pragma: no cover
    from ..scheduler import Scheduler


@register("spot-hybrid")
class SpotHybridPolicy(DynamicPolicy):
    def __init__(
        self,
        safety: float = 0.5,
        prior_lifetime_s: float = 3600.0,
        min_interval_s: float = 60.0,
        idle_grace_s: float = 600.0,
        node_gpus: int = 8,
    ) -> None:
        super().__init__()
        if not 0 < safety < 1:
            raise ValueError("spot-hybrid safety must be between 0 and 1")
        if prior_lifetime_s <= 0 or min_interval_s <= 0 or idle_grace_s < 0 or node_gpus < 1:
            raise ValueError("spot-hybrid prior_lifetime_s, min_interval_s, node_gpus must be positive")
        self.safety = safety
        self.prior_lifetime_s = prior_lifetime_s
        self.min_interval_s = min_interval_s
        self.idle_grace_s = idle_grace_s
        self.node_gpus = node_gpus
        self.shortest_lifetime: dict[str, float] = {}  # spot pool -> shortest lifetime seen
        self._born: dict[str, tuple[str, float]] = {}  # live spot node -> (pool, first seen)
        self._other: set[str] = set()  # nodes seen that are not spot
        self._fingerprint: tuple = ()
        self._idle_since: dict[str, float] = {}
        self._target: dict[str, int] = {}  # spot pool -> nodes last asked for

    # --- learning the spot nodes --------------------------------------------------------------
    def observe(self, s: Scheduler, now: float) -> None:
        """Note new spot nodes (lifetimes are learnt in `node_leaving`). Cheap when nothing
        changed: nodes are only ever appended to `on_node`, so (count, last node) tells."""
        on_node = s.on_node
        fp = (len(on_node), next(reversed(on_node), None))
        if fp == self._fingerprint:
            return
        self._fingerprint = fp
        for node in [n for n in self._born if n not in on_node]:
            self._born.pop(node)
            self._idle_since.pop(node, None)
        cluster = s.cluster
        for n in reversed(on_node):
            if n in self._born or n in self._other:
                break
            if n not in cluster:
                continue
            pool = cluster.pool_of(n)
            if cluster.pools[pool].spot:
                self._born[n] = (pool, now)
            else:
                self._other.add(n)

    def node_leaving(self, s: Scheduler, node: str, now: float, interrupted: bool) -> None:
        """Learn a spot lifetime from an interruption only, never from a scale-in."""
        self.observe(s, now)  # a node added since the last pass is known before it goes
        born = self._born.pop(node, None)
        self._idle_since.pop(node, None)
        if born is None or not interrupted:
            return
        pool, since = born
        life = now - since
        if life > 0:
            self.shortest_lifetime[pool] = min(self.shortest_lifetime.get(pool, life), life)

    def max_pool_gpus(self, s: Scheduler, pool: str) -> float:
        """The elastic spot pool may grow to `max_nodes` (unbounded without it)."""
        now = s.cluster.pool_gpus(pool)
        if pool != _elastic_pool(s):
            return now
        spec = s.cluster.pools[pool]
        if spec.max_nodes is None:
            return math.inf
        return max(now, spec.max_nodes * self._node_size(s, pool))

    def _node_size(self, s: Scheduler, pool: str) -> int:
        """GPUs on a node the driver adds to `pool`: what the pool says, else like the ones
        there, else the policy's `node_gpus`."""
        return s.cluster.pools[pool].node_gpus or s.cluster.max_node_gpus([pool]) or self.node_gpus

    def lifetime_bound(self, pool: str) -> float:
        return min(self.prior_lifetime_s, self.shortest_lifetime.get(pool, self.prior_lifetime_s))

    def checkpoint_interval(self, s: Scheduler, job: Job, now: float) -> float | None:
        """The interval a job should checkpoint at in the attempt starting now."""
        base = job.spec.checkpoint_interval
        if base is None or not job.allocation:
            return base
        spot = {
            s.cluster.pool_of(n)
            for n, _ in job.allocation
            if n in s.cluster and s.cluster.pools[s.cluster.pool_of(n)].spot
        }
        if not spot:
            return base
        cap = self.safety * min(self.lifetime_bound(p) for p in spot)
        return max(self.min_interval_s, min(base, cap))

    # --- the pass ----------------------------------------------------------------------------
    def schedule(self, s: Scheduler, now: float) -> None:
        self.observe(s, now)
        super().schedule(s, now)
        pool = _elastic_pool(s)
        if pool is None:
            return
        demand = self._spot_demand(s, now, pool)
        moved_need = 0
        if s.queue and not self._spot_full(s, pool, demand):
            moved_need = self._make_room_on_demand(s, now)
            demand = self._spot_demand(s, now, pool)  # the jobs it moved wait for spot now
        self._scale(s, pool, demand, moved_need)

    def _granted(self, s: Scheduler, job: Job, now: float) -> bool:
        """Never: `dynamic`'s grant (rule 7) is for a fixed cluster. Here the jobs that may not
        run on spot share a small on-demand base, and a granted large job there (reserved, not
        reclaimable) held it from them: on `philly-loaded-full` avg JCT 17.4 -> 27.8 h, high-priority
        jobs' mean wait 23.8 -> 46.9 h, and the large jobs waited no less (benchmarks/RESULTS.md)."""
        return False

    def next_wakeup(self, s: Scheduler, now: float) -> float | None:
        """When an idle spot node's grace runs out (the driver wakes the scheduler then), or
        `dynamic`'s own wakeup (a run to pause at its checkpoint) if sooner."""
        times = [t for t in (super().next_wakeup(s, now),) if t is not None]
        if self._idle_since:
            times.append(min(self._idle_since.values()) + self.idle_grace_s)
        return min(times, default=None)

    def _spot_full(self, s: Scheduler, pool: str, demand: tuple[int, int, int]) -> bool:
        """No spot GPU a moved job could take, and the preemptible jobs already waiting ask the
        pool for its largest size: the make-room walk could then move no job, and what it would
        ask spot for on top changes nothing (`_scale`), so the pass skips it (issue 12, fault 8:
        on a busy spot pool this is most passes)."""
        max_nodes = s.cluster.pools[pool].max_nodes
        if max_nodes is None or self._spot_free(s)[0]:
            return False
        kept, need, size = demand
        return need > 0 and kept + math.ceil(need / size) >= max_nodes

    def _spot_free(self, s: Scheduler) -> tuple[int, int]:
        """Free spot GPUs a moved job could take: none on a node reserved for another job."""
        cluster = s.cluster
        free = [cluster.free_on(n) for n in self._born if n in cluster and n not in self._shadow]
        return sum(free), max(free, default=0)

    def _make_room_on_demand(self, s: Scheduler, now: float) -> int:
        """Move preemptible jobs off on-demand nodes for waiting jobs that need those.
        Returns the spot GPUs it would still need to move more."""
        cluster = s.cluster
        movable: dict[str, list[Job]] | None = None  # on-demand node -> preemptible checkpointing jobs on it
        wanted = 0
        # Room is made in aged order, only for jobs that may not run on spot, and never for a job
        # that would pass an older job of its tenant waiting for the same GPUs (queues.TenantLine).
        # Once a job waits in that line, the rest of its queue group (`dynamic_group`: alike, one
        # size) would only wait behind it, so the group is set aside for the pass; a preemptible
        # job no larger than one alike (GPU type, estimate, not a reservation owner) already in
        # line, of another group, is passed over too.
        line = TenantLine()
        kinds: dict[tuple[bool, str | None], frozenset[str]] = {}  # (preemptible, GPU type) -> its pools
        in_line: dict[tuple[str, str | None, float | None], int] = {}
        owners = self._reservations
        walk = s.queue.walk(always=owners)
        for job in walk:
            g, tenant = job.gpus, job.tenant
            if job.spec.preemptible and job.id not in owners:
                alike = (tenant, job.spec.gpu_type, job.spec.runtime_estimate)
                if g >= in_line.get(alike, math.inf):
                    walk.set_aside(for_pass=True)
                    continue
                in_line[alike] = g
            kind = (job.spec.preemptible, job.spec.gpu_type)
            pools = kinds.get(kind)
            if pools is None:
                pools = kinds[kind] = frozenset(p for group in s.pool_choices(job.spec) for p in group)
            exclude = self._excluded(job, now)
            if job.spec.preemptible or not line.may_pass(tenant, g, pools, exclude):
                line.wait(tenant, g, pools, exclude)
                walk.set_aside(for_pass=True)
                continue
            admission = s.ledger.classify(tenant, g, job.spec.interactive)
            if admission is Admission.OVER_LIMIT or s.place(job, exclude) is not None:
                # over its limit, or dynamic left it waiting for another reason (its turn)
                line.wait(tenant, g, pools, exclude)
                walk.set_aside(for_pass=True)
                continue
            if movable is None:  # first needed here: most passes have no job that gets this far
                movable = _movable(s)
                if not movable:
                    return 0
                spot_free, largest_hole = self._spot_free(s)
            if g > cluster.max_node_gpus(pools):
                best = self._clear_nodes(s, movable, pools, exclude, g, now)  # a multi-node job
            else:
                best = None
                for node, jobs in movable.items():
                    if node in exclude or cluster.pool_of(node) not in pools or cluster.capacity(node) < g:
                        continue
                    got = _make_room(cluster.free_on(node), jobs, g, now)
                    if got is not None and (best is None or (got[0], node) < (best[0], best[2][0])):
                        best = (got[0], got[1], [node])
            if best is None:
                line.wait(tenant, g, pools, exclude)
                walk.set_aside(for_pass=True)
                continue
            (moved, _), chosen, nodes = best
            if moved > spot_free or any(v.gpus > largest_hole for v in chosen):
                wanted += moved  # spot must grow first
                line.wait(tenant, g, pools, exclude)
                walk.set_aside(for_pass=True)
                continue
            for v in chosen:
                s.preempt(v.id, now, f"moved to spot to free on-demand GPUs for {job.id}")
                for node in nodes:
                    if v in movable.get(node, ()):
                        movable[node].remove(v)
            spot_free -= moved
            alloc = s.place(job, exclude)
            if alloc is not None:
                s.admit(job, alloc, borrowed=admission is Admission.BORROW, now=now)
        return wanted

    def _clear_nodes(
        self, s: Scheduler, movable: dict[str, list[Job]], pools: frozenset[str], exclude, gpus: int, now: float
    ) -> tuple[tuple[int, float], list[Job], list[str]] | None:
        """For a job larger than a node: the whole nodes to clear (free ones first, then the
        cheapest to empty of movable jobs) until they hold `gpus`, or None."""
        cluster = s.cluster
        ranked = []
        for node in s.cluster.node_names:
            if node in exclude or cluster.pool_of(node) not in pools:
                continue
            cap = cluster.capacity(node)
            got = _make_room(cluster.free_on(node), movable.get(node, []), cap, now)
            if got is not None:
                ranked.append((got[0], node, got[1]))
        ranked.sort(key=lambda r: (r[0], r[1]))
        chosen: list[Job] = []
        nodes: list[str] = []
        total, moved, risk = 0, 0, 0.0
        for (m, r), node, victims in ranked:
            if total >= gpus:
                break
            nodes.append(node)
            chosen.extend(victims)
            total += cluster.capacity(node)
            moved, risk = moved + m, risk + r
        if total < gpus:
            return None
        return (moved, risk), chosen, nodes

    def _spot_demand(self, s: Scheduler, now: float, pool: str) -> tuple[int, int, int]:
        """(spot nodes to keep: running jobs, or idle still in their grace; GPUs the waiting
        preemptible jobs ask for; GPUs on a node the driver adds). Notes when nodes fall idle;
        asking twice at one time answers the same."""
        cluster = s.cluster
        kept = 0
        sizes = []
        for n, (p, _) in self._born.items():
            if p != pool or n not in cluster:
                continue
            sizes.append(cluster.capacity(n))
            if s.on_node.get(n) or cluster.free_on(n) < cluster.capacity(n):
                self._idle_since.pop(n, None)
                kept += 1
            else:
                since = self._idle_since.setdefault(n, now)
                if now - since < self.idle_grace_s:
                    kept += 1
        need = 0
        admissible: dict[str, float] = {}  # tenant -> the largest job it may start now
        for (tenant, gpus, preemptible), count in s.queue.kinds().items():
            if preemptible:
                room = admissible.get(tenant)
                if room is None:
                    room = admissible[tenant] = s.ledger.admissible(tenant)
                if gpus <= room:
                    need += gpus * count
        return kept, need, cluster.pools[pool].node_gpus or max(sizes, default=self.node_gpus)

    def _scale(self, s: Scheduler, pool: str, demand: tuple[int, int, int], moved_need: int) -> None:
        """Size the spot pool (`demand`: `_spot_demand`'s answer): nodes running jobs, plus idle
        nodes still in their grace, plus new nodes for the preemptible work that found no room.
        Idempotent: the driver counts nodes on their way, so asking again while they come
        changes nothing."""
        spec = s.cluster.pools[pool]
        kept, need, size = demand
        need += moved_need
        want = max(kept + math.ceil(need / size), spec.min_nodes)
        if spec.max_nodes is not None:
            want = min(want, spec.max_nodes)
        if need > 0 or want != self._target.get(pool):
            self._target[pool] = want
            s.scale(pool, want, "preemptible work waiting" if need > 0 else "idle spot nodes given back")


def _movable(s: Scheduler) -> dict[str, list[Job]]:
    """On-demand node -> the preemptible, checkpointing single-node runs on it."""
    cluster = s.cluster
    movable: dict[str, list[Job]] = {}
    for j in s.active.values():
        if not j.spec.preemptible or j.spec.checkpoint_interval is None or len(j.allocation) != 1:
            continue
        node = j.allocation[0][0]
        if node in cluster and not cluster.pools[cluster.pool_of(node)].spot:
            movable.setdefault(node, []).append(j)
    return movable


def _make_room(free: int, jobs: list[Job], need: int, now: float) -> tuple[tuple[int, float], list[Job]] | None:
    """The movable jobs to stop on one node so it has `need` free GPUs (least work at risk
    first): ((GPUs moved, work at risk), jobs), or None when they are not enough."""
    jobs.sort(key=lambda v: (work_at_risk(v, now), -v.seq))
    chosen, moved, risk = [], 0, 0.0
    for v in jobs:
        if free >= need:
            break
        chosen.append(v)
        free += v.gpus
        moved += v.gpus
        risk += work_at_risk(v, now)
    if free < need:
        return None
    return (moved, risk), chosen


def _elastic_pool(s: Scheduler) -> str | None:
    """The first spot pool by name is the elastic one; other pools keep their size."""
    return min((name for name, p in s.cluster.pools.items() if p.spot), default=None)
