"""The grouped queue walk (issue 12, fault 8) decides exactly what the plain walk does, in
`dynamic`, `spot-hybrid`, `static` and `tiresias`.

The plain walk visits every queued job; the grouped walk (JobQueue.walk with the policy's
queue_group) skips the jobs of a group whose last visit changed nothing, until something
changes that could let them do more. The reference is the same policy with the grouping
turned off (queue_group -> None: JobQueue.walk is then the plain walk, PlainWalk), so any
job the grouped walk wrongly skips shows as a different start time.
"""

from __future__ import annotations

import math
import random

import pytest

from jupyter_gpusched.core.model import Job, JobSpec, NodeSpec, Priority, Tenant
from jupyter_gpusched.core.policies import pausing as pausing_module
from jupyter_gpusched.core.policies.dynamic import DynamicPolicy, dynamic_group
from jupyter_gpusched.core.policies.spot_hybrid import SpotHybridPolicy
from jupyter_gpusched.core.policies.static import StaticPolicy
from jupyter_gpusched.core.policies.tiresias import TiresiasPolicy
from jupyter_gpusched.core.queues import JobQueue, fifo_key
from jupyter_gpusched.core.scheduler import Preempt, Scale, SchedulerConfig
from jupyter_gpusched.sim.config import Lifetime
from jupyter_gpusched.sim.engine import CheckpointModel, PoolConfig, SimJob, Simulation
from jupyter_gpusched.sim.traces import TraceJob

# quota 0: borrows only; quota 8 with 16-GPU jobs: past its whole quota (can only borrow)
TENANTS = [Tenant("a", 16), Tenant("b", 16, burst=8), Tenant("c", 8), Tenant("d", 24), Tenant("e", 0)]


class PlainDynamic(DynamicPolicy):
    """The reference: the same pass over every queued job."""

    def queue_group(self):
        return None


class SpotHybridWanted(SpotHybridPolicy):
    """Records what each pass's make-room walk asked of the spot pool (GPUs to move)."""

    def __init__(self):
        super().__init__()
        self.wanted: list[int] = []

    def _make_room_on_demand(self, s, now):
        self.wanted.append(super()._make_room_on_demand(s, now))
        return self.wanted[-1]


class PlainSpotHybrid(SpotHybridWanted):
    def queue_group(self):
        return None


class NoSkipSpotHybrid(SpotHybridPolicy):
    """The reference for `_spot_full`: the make-room walk runs in every pass. Records each
    pass's scale decisions; `skipped` counts the passes the real policy would have skipped."""

    def __init__(self):
        super().__init__()
        self.scales: list[tuple] = []
        self.skipped = self.moved = 0

    def _spot_full(self, s, pool, demand):
        self.skipped += super()._spot_full(s, pool, demand)
        return False

    def _scale(self, s, pool, demand, moved_need):
        super()._scale(s, pool, demand, moved_need)
        self.scales.append(tuple(d for d in s._decisions if isinstance(d, Scale)))
        self.moved += sum(isinstance(d, Preempt) and d.reason.startswith("moved to spot") for d in s._decisions)


class ScalesSpotHybrid(SpotHybridPolicy):
    def __init__(self):
        super().__init__()
        self.scales: list[tuple] = []

    def _scale(self, s, pool, demand, moved_need):
        super()._scale(s, pool, demand, moved_need)
        self.scales.append(tuple(d for d in s._decisions if isinstance(d, Scale)))


class PlainStatic(StaticPolicy):
    def queue_group(self):
        return None


class PlainTiresias(TiresiasPolicy):
    def queue_group(self):
        return None


def _workload(n: int, seed: int, gap: float = 110.0) -> list[SimJob]:
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / gap)  # 110 s: overloaded, about 1.2x the 72 GPUs' capacity
        prio = rng.choice([Priority.HIGH, Priority.NORMAL, Priority.LOW])
        gpus = rng.choices([1, 2, 4, 8, 16], [45, 20, 15, 12, 8])[0]
        tenant = rng.choices(TENANTS, [30, 25, 20, 15, 10])[0].name
        dur = min(rng.lognormvariate(math.log(1800), 1.0), 86400)
        status = rng.choices(["ok", "failed", "cancelled"], [90, 5, 5])[0]
        jobs.append(SimJob(TraceJob(f"j{i}", t, dur, gpus, tenant, status=status), prio, prio is not Priority.HIGH))
    return jobs


def _replay(
    policy, estimates: str, seed: int, reservations: int, spot: bool = False, gap: float = 110.0
) -> tuple[list[tuple], int]:
    pools = [
        PoolConfig("od", tuple(NodeSpec(f"od-{i}", 8, "od") for i in range(3 if spot else 6)), 3.0, gpus_per_node=8),
        PoolConfig("big", tuple(NodeSpec(f"big-{i}", 16, "big") for i in range(1)), 3.0, gpus_per_node=16),
    ]
    if spot:  # half the 8-GPU nodes on spot, bought as needed (spot-hybrid's make-room walk and sizing)
        life = Lifetime("exponential", mean_s=6 * 3600, min_s=1800, max_s=86400)
        pools.append(PoolConfig("spot", (), 0.9, spot=True, lifetime=life, gpus_per_node=8, max_nodes=3))
    ck = CheckpointModel(interval_s=1800, cost_s=30, restore_s=60, applies_to="preemptible")
    sim = Simulation(
        _workload(700, seed, gap), pools, TENANTS, policy, checkpoint=ck, estimates=estimates,
        config=SchedulerConfig(aging_interval=1800, max_reservations=reservations),
    )  # fmt: skip
    res = sim.run()
    return [(j.id, j.first_start, j.end, j.attempts, j.preemptions, j.state) for j in res.jobs], res.scheduler_passes


@pytest.mark.parametrize(
    ("estimates", "seed", "reservations"),
    [("none", 1, 1), ("learned", 2, 1), ("exact", 3, 2), ("learned", 4, 3)],
)
def test_grouped_walk_schedules_exactly_as_the_plain_walk(estimates, seed, reservations):
    grouped, passes = _replay(DynamicPolicy(), estimates, seed, reservations)
    plain, plain_passes = _replay(PlainDynamic(), estimates, seed, reservations)
    assert grouped == plain and passes == plain_passes
    # the workload is loaded enough to matter: jobs wait, some are preempted, all end
    assert sum(1 for r in plain if r[1] is not None and r[1] > 0) > 0
    assert any(r[4] for r in plain) and all(r[2] is not None for r in plain)


@pytest.mark.parametrize(("estimates", "seed"), [("none", 1), ("learned", 2), ("exact", 3)])
def test_spot_hybrid_grouped_walks_schedule_exactly_as_the_plain_walk(estimates, seed):
    # its own make-room walk sets groups aside as well as dynamic's walks
    grouped_policy, plain_policy = SpotHybridWanted(), PlainSpotHybrid()
    grouped, passes = _replay(grouped_policy, estimates, seed, 1, spot=True)
    plain, plain_passes = _replay(plain_policy, estimates, seed, 1, spot=True)
    assert grouped == plain and passes == plain_passes
    assert grouped_policy.wanted == plain_policy.wanted and sum(w > 0 for w in plain_policy.wanted) > 100
    assert sum(1 for r in plain if r[1] is not None and r[1] > 0) > 100
    assert any(r[4] for r in plain) and all(r[2] is not None for r in plain)


@pytest.mark.parametrize(("estimates", "seed"), [("none", 6), ("exact", 3)])
def test_spot_hybrid_skips_the_make_room_walk_only_where_it_could_change_nothing(estimates, seed):
    # With no free spot GPU and the pool asked to its largest size already, the make-room walk
    # is skipped (`_spot_full`): the schedule and every pass's scale decision stay the same.
    policy, reference = ScalesSpotHybrid(), NoSkipSpotHybrid()
    got, passes = _replay(policy, estimates, seed, 1, spot=True)
    want, want_passes = _replay(reference, estimates, seed, 1, spot=True)
    assert got == want and passes == want_passes and policy.scales == reference.scales
    assert reference.skipped > 1000 and reference.moved > 20  # skips happen, and so do moves


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_static_grouped_walk_schedules_exactly_as_the_plain_walk(seed):
    # static blocks a tenant's line at its first job that cannot start (tenant e, quota 0, always)
    grouped, passes = _replay(StaticPolicy(), "none", seed, 1)
    plain, plain_passes = _replay(PlainStatic(), "none", seed, 1)
    assert grouped == plain and passes == plain_passes
    waited = [r for r in plain if r[1] is not None and r[1] > 0]
    assert len(waited) > 100 and any(r[1] is None for r in plain)  # lines form; e's jobs never start


@pytest.mark.parametrize(("thresholds", "seed"), [((3600.0,), 1), ((3600.0,), 2), ((1800.0, 14400.0), 3)])
def test_tiresias_grouped_walk_schedules_exactly_as_the_plain_walk(thresholds, seed):
    grouped, passes = _replay(TiresiasPolicy(thresholds), "none", seed, 1)
    plain, plain_passes = _replay(PlainTiresias(thresholds), "none", seed, 1)
    assert grouped == plain and passes == plain_passes
    assert sum(1 for r in plain if r[1] is not None and r[1] > 0) > 100
    assert sum(r[4] for r in plain) > 20 and all(r[2] is not None for r in plain)  # demotions preempt; all end


class CheckedDynamic(DynamicPolicy):
    """Checks, before each pass, that every queued job is filed under its group as it is now."""

    checked = 0

    def schedule(self, s, now):
        for job in s.queue:
            assert s.queue._group_of[job.id] == dynamic_group(job), job.id
            self.checked += job.spec.learned_runtime is not None
        super().schedule(s, now)


def test_learned_estimates_keep_queued_jobs_in_their_group():
    # a queued job's learned estimate changes as runs like it finish: the driver regroups it
    policy = CheckedDynamic()
    _replay(policy, "learned", 5, 1)
    assert policy.checked > 1000


def _job(i: int, tenant: str, gpus: int, t: float) -> Job:
    return Job(id=f"j{i}", spec=JobSpec("n", gpus=gpus, tenant=tenant), submitted_at=t, seq=i)


def test_grouped_walk_sets_groups_aside_until_a_change():
    q = JobQueue(fifo_key, group=lambda j: (j.spec.tenant, j.spec.gpus))
    jobs = [_job(i, "ab"[i % 2], 1, float(i)) for i in range(8)]  # a: j0 j2 j4 j6, b: j1 j3 j5 j7
    for job in jobs:
        q.push(job)
    seen = []
    walk = q.walk(always={"j4"})
    for job in walk:
        seen.append(job.id)
        if job.id in ("j0", "j1"):
            walk.set_aside()  # both groups rest ...
        if job.id == "j4":  # ... but j4 is always visited
            walk.changed()  # and its change resumes them after it
            q.push(_job(99, "a", 1, -1.0))  # pushed during the walk: not in this walk
            q.remove("j6")  # removed during the walk: not yielded
        if job.id == "j5":
            walk.set_aside(for_pass=True)
        if job.id == "j7":
            raise AssertionError("b was set aside for the pass")
    assert seen == ["j0", "j1", "j4", "j5"]
    assert [j.id for j in q.walk()] == ["j99", "j0", "j1", "j2", "j3", "j4", "j5", "j7"]


def test_a_change_to_one_tenant_resumes_only_its_groups():
    q = JobQueue(fifo_key, group=lambda j: (j.spec.tenant, j.spec.gpus))
    for i, (tenant, gpus) in enumerate(["a1", "b1", "a2", "b1", "a1", "b1", "a2"]):
        q.push(_job(i, tenant, int(gpus), float(i)))  # a1: j0 j4; b1: j1 j3 j5; a2: j2 j6
    seen = []
    walk = q.walk()
    for job in walk:
        seen.append(job.id)
        if job.id in ("j0", "j1"):
            walk.set_aside()
        if job.id == "j2":
            walk.changed("a")  # a's set-aside groups (a1) resume after j2; b1 stays aside
    assert seen == ["j0", "j1", "j2", "j4", "j6"]


def test_regroup_follows_a_changed_estimate():
    q = JobQueue(fifo_key, group=dynamic_group)
    job = _job(0, "a", 1, 0.0)
    q.push(job)
    q.push(_job(1, "a", 1, 1.0))
    assert len(q._groups) == 1
    job.spec = JobSpec("n", gpus=1, tenant="a", learned_runtime=600.0)
    q.regroup(job)
    assert len(q._groups) == 2 and [j.id for j in q.walk()] == ["j0", "j1"]


class CountingDynamic(DynamicPolicy):
    """Counts the pauses tried (`_pause` calls) and made."""

    def __init__(self) -> None:
        super().__init__()
        self.tried = self.made = 0

    def _pause(self, s, job, now, exclude, candidates):
        self.tried += 1
        made = super()._pause(s, job, now, exclude, candidates)
        self.made += made
        return made


@pytest.mark.parametrize("seed", [1, 2])
def test_the_pause_room_bound_skips_only_pauses_that_would_fail(seed, monkeypatch):
    bounded = CountingDynamic()
    with_bound = _replay(bounded, "learned", seed, 1)
    monkeypatch.setattr(pausing_module, "pause_room", lambda s, pausable: {None: math.inf})
    unbounded = CountingDynamic()
    assert _replay(unbounded, "learned", seed, 1) == with_bound
    # pauses are made, and the bound spared most of the tries that found nothing
    assert bounded.made == unbounded.made > 0
    assert bounded.tried - bounded.made < (unbounded.tried - unbounded.made) / 2


class FullCheckPause(CountingDynamic):
    """`_pause` given only the candidates that pass `could_pause` in full at each try (as every try
    once checked them), not the walk's index with its cheap test that a run still has its start."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0

    def _pause(self, s, job, now, exclude, candidates):
        checked = {
            node: [(v, c) for v, c in runs if v.id in s.active and pausing_module.could_pause(s, v, now)]
            for node, runs in candidates.items()
        }
        self.dropped += sum(map(len, candidates.values())) - sum(map(len, checked.values()))
        return super()._pause(s, job, now, exclude, checked)


class CountingSpotHybrid(CountingDynamic, SpotHybridPolicy):
    pass


class FullCheckSpotHybrid(FullCheckPause, SpotHybridPolicy):
    pass


@pytest.mark.parametrize(
    ("estimates", "seed", "spot"), [("learned", 1, False), ("learned", 2, False), ("none", 3, True)]
)
def test_pause_candidates_indexed_once_a_walk_pause_as_a_full_check_does(estimates, seed, spot):
    indexed = CountingSpotHybrid() if spot else CountingDynamic()
    full = FullCheckSpotHybrid() if spot else FullCheckPause()
    assert _replay(indexed, estimates, seed, 1, spot=spot) == _replay(full, estimates, seed, 1, spot=spot)
    # pauses are made, and some tries met a run paused or reclaimed earlier in the same walk
    assert indexed.made == full.made > 0 and full.dropped > 0
