"""Property tests: random clusters, tenants and operation sequences for every policy.

After every step the scheduler's books must balance (GPUs, quotas, queue membership, event
history) and replaying the same operations on a fresh scheduler must give the same
decisions and events. A separate set checks the no-starvation bound of aging (dynamic).
"""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpusched.core import (
    Admit,
    Cluster,
    IllegalTransition,
    JobSpec,
    JobState,
    NodeSpec,
    Pool,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
    Tenant,
    policy_names,
)
from jupyter_gpusched.core.lookahead import fork
from jupyter_gpusched.core.policies.dynamic import DynamicPolicy
from jupyter_gpusched.core.queues import starvation_bound
from jupyter_gpusched.core.quotas import Admission, QuotaLedger

S = JobState
POLICIES = policy_names()
# Modest by default (the file runs in well under a minute on 2 cores); raise for a deep run:
# GPUSCHED_PROPERTY_SCALE=20 pytest tests/test_core_properties.py
SCALE = max(1, int(os.environ.get("GPUSCHED_PROPERTY_SCALE", "1")))
SETTINGS = settings(max_examples=60 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- random worlds ------------------------------------------------------------------------------------
nodes_st = st.lists(
    st.tuples(st.integers(1, 8), st.booleans()),  # (GPUs, spot?)
    min_size=1,
    max_size=20,
)
tenants_st = st.lists(
    st.tuples(st.integers(0, 16), st.one_of(st.none(), st.integers(0, 16))),  # (quota, burst)
    min_size=1,
    max_size=4,
)
KINDS = [
    "submit",
    "submit",
    "submit",
    "schedule",
    "schedule",
    "schedule",
    "start",
    "start",
    "finish",
    "finish",
    "cancel",
    "lost",
    "not_started",
    "node_lost",
    "fence",
    "unfence",
    "advance",
    "bad",
    "estimate",
]
op_st = st.tuples(
    st.sampled_from(KINDS),
    st.integers(0, 1000),  # which job / node / tenant
    st.integers(1, 9),  # GPUs, or a GPU index
    st.sampled_from(list(Priority)),
    st.one_of(st.none(), st.integers(1, 200)),  # runtime estimate
    st.booleans(),  # ok / preemptible
    st.integers(0, 2),  # max_retries
)
ops_st = st.lists(op_st, min_size=20, max_size=80)


def build(nodes, tenants, policy: str) -> Scheduler:
    pools = [Pool("od"), Pool("spot", spot=True)]
    cluster = Cluster([NodeSpec(f"n{i}", g, "spot" if spot else "od") for i, (g, spot) in enumerate(nodes)], pools)
    terms = [Tenant(f"t{i}", q, b) for i, (q, b) in enumerate(tenants)]
    # grants (rule 7) after a few aging intervals, so the random workloads reach them
    return Scheduler(cluster, terms, policy, SchedulerConfig(aging_interval=50.0, oversize_grant_after=150.0))


def pick(items, i):
    return items[i % len(items)] if items else None


def by_state(s: Scheduler, *states: JobState) -> list:
    return [j for j in sorted(s.jobs.values(), key=lambda j: j.seq) if j.state in states]


def apply(s: Scheduler, op, now: float, n_tenants: int, estimate: bool = True):
    """Apply one operation; return (new now, what happened) for the transcript. `estimate`: whether
    "estimate" asks every queued job's estimated start (it must change nothing: it is left out of the
    transcript, so plays with and without it compare)."""
    kind, i, g, prio, est, flag, retries = op
    if kind == "estimate":
        if estimate:
            before = books(s)
            starts = [s.estimate_start(j.id, now) for j in list(s.queue)]
            assert books(s) == before
            assert all(t is None or now <= t < math.inf for t in starts)
        return now, ("estimated",)
    if kind == "submit":
        spec = JobSpec(
            "nb.ipynb",
            gpus=g,
            priority=prio,
            tenant=f"t{i % (n_tenants + 1)}",  # sometimes a tenant nobody configured
            est_runtime=None if est is None else float(est),
            preemptible=flag,
            max_retries=retries,
        )
        try:
            return now, ("submitted", s.submit(spec, now).id)
        except SpecError as e:
            return now, ("rejected", e.field)
    if kind == "schedule":
        return now, ("decisions", tuple(s.schedule(now)))
    if kind == "advance":
        return now + g * 7.5, ("now", now + g * 7.5)
    if kind in ("node_lost", "fence", "unfence"):
        node = pick(sorted(s.cluster.node_names), i)
        if node is None:
            return now, ("no node",)
        if kind == "node_lost":
            return now, ("node_lost", node, tuple(j.id for j in s.node_lost(node, now)))
        gpu = g % max(1, s.cluster.capacity(node)) if s.cluster.capacity(node) else 0
        if not s.cluster.capacity(node):
            return now, ("empty node",)
        getattr(s.cluster, kind)(node, gpu)
        return now, (kind, node, gpu)
    if kind == "bad":
        return now, ("bad", try_illegal(s, op, now))
    targets = {
        "start": (S.ADMITTED,),
        "finish": (S.RUNNING,) if flag else (S.ADMITTED, S.RUNNING, S.QUEUED),
        "cancel": (S.QUEUED, S.ADMITTED, S.RUNNING),
        "lost": (S.ADMITTED, S.RUNNING),
        "not_started": (S.ADMITTED,),
    }[kind]
    job = pick(by_state(s, *targets), i)
    if job is None:
        return now, ("no job", kind)
    if kind == "start":
        s.started(job.id, now)
    elif kind == "finish":
        s.finished(job.id, now, ok=flag)
    elif kind == "cancel":
        s.cancel(job.id, now)
    elif kind == "lost":
        s.lost(job.id, now)
    else:
        s.not_started(job.id, now, "backend refused")
    return now, (kind, job.id, job.state)


def try_illegal(s: Scheduler, op, now: float):
    """A report the lifecycle forbids must raise and change nothing."""
    _, i, g, *_ = op
    candidates = [
        (S.QUEUED, lambda j: s.started(j, now)),
        (S.QUEUED, lambda j: s.lost(j, now)),
        (S.QUEUED, lambda j: s.finished(j, now, ok=True)),
        (S.ADMITTED, lambda j: s.finished(j, now, ok=True)),
        (S.RUNNING, lambda j: s.not_started(j, now, "x")),
        (S.RUNNING, lambda j: s.started(j, now)),
        (S.SUCCEEDED, lambda j: s.lost(j, now)),
        (S.CANCELLED, lambda j: s.preempt(j, now, "x")),
        (S.FAILED, lambda j: s.finished(j, now, ok=False)),
    ]
    state, call = candidates[g % len(candidates)]
    job = pick(by_state(s, state), i)
    if job is None:
        return None
    before = books(s)
    with pytest.raises(IllegalTransition):
        call(job.id)
    assert books(s) == before
    return job.id


def books(s: Scheduler) -> tuple:
    return (
        tuple((j.id, j.state, j.allocation, j.borrowed, j.attempts) for j in s.jobs.values()),
        tuple(j.id for j in s.queue),
        tuple(s.active),
        s.cluster.free_gpus,
        tuple(sorted(s.ledger.used.items())),
        len(s.events),
    )


def check_invariants(s: Scheduler) -> None:
    c = s.cluster
    # GPUs: nothing given twice, allocations within capacity, counters agree
    owner: dict[tuple[str, int], str] = {}
    per_node = Counter()
    for job in s.active.values():
        assert sum(len(ids) for _, ids in job.allocation) == job.gpus
        assert len(job.nodes) == len(set(job.nodes))
        for node, ids in job.allocation:
            assert node in c, f"{job.id} holds GPUs on a node that left"
            for gpu in ids:
                assert 0 <= gpu < c.capacity(node)
                assert (node, gpu) not in owner, f"GPU {node}:{gpu} given to {owner[(node, gpu)]} and {job.id}"
                owner[(node, gpu)] = job.id
                per_node[node] += 1
    allocated = fenced_idle = 0
    for node in c.node_names:
        free, fenced = set(c.free_ids(node)), set(c.fenced_on(node))
        busy = {gpu for (n, gpu) in owner if n == node}
        assert per_node[node] <= c.capacity(node)
        assert not free & busy and not free & fenced
        assert free | busy | fenced == set(range(c.capacity(node)))
        allocated += len(busy)
        fenced_idle += len(fenced - busy)
    assert allocated <= c.total_gpus == sum(c.capacity(n) for n in c.node_names)
    assert c.free_gpus == c.total_gpus - allocated - fenced_idle
    assert set(s.on_node) >= set(c.node_names)
    for node, ids in s.on_node.items():
        assert ids == {j.id for j in s.active.values() if node in j.nodes}

    # quotas: the ledger is the sum over active jobs
    used, borrowed = Counter(), Counter()
    for job in s.active.values():
        used[job.tenant] += job.gpus
        if job.borrowed:
            borrowed[job.tenant] += job.gpus
    for tenant in set(used) | set(s.ledger.used):
        assert s.ledger.used.get(tenant, 0) == used[tenant]
        assert s.ledger.borrowed.get(tenant, 0) == borrowed[tenant]
    assert set(s.borrowers) == {j.id for j in s.active.values() if j.borrowed}
    if isinstance(s.policy, DynamicPolicy):
        # rule 7's grant: a job larger than its tenant's quota, run as if within it; one at a time
        grants = [j for j in s.active.values() if not j.borrowed and j.gpus > s.ledger.tenant(j.tenant).quota]
        assert len(grants) <= 1
        granted = Counter({j.tenant: j.gpus for j in grants})
        for tenant in used:
            terms = s.ledger.tenant(tenant)
            # above its quota a tenant runs only reclaimable (borrowed) jobs, or the grant, and never
            # past its limit
            assert used[tenant] - borrowed[tenant] <= terms.quota + granted[tenant]
            assert used[tenant] <= terms.limit
    if not s.policy.allow_borrowing:
        assert not borrowed
        for tenant in used:
            assert used[tenant] <= s.ledger.tenant(tenant).quota

    # each job in exactly one of queue / active / ended, as its state says
    queued = [j.id for j in s.queue]
    assert len(queued) == len(set(queued)) == len(s.queue)
    for job in s.jobs.values():
        places = (job.id in s.queue, job.id in s.active, job.state.terminal)
        assert sum(places) == 1, (job.id, job.state, places)
        assert places[0] == (job.state is S.QUEUED)
        assert places[1] == job.state.holds_gpus
        if not job.state.holds_gpus:
            assert job.allocation == () and not job.borrowed
    assert set(s.active) <= set(s.jobs)


def check_history(s: Scheduler) -> None:
    """Every job's events chain from its submission to its current state."""
    last: dict[str, JobState] = {}
    for e in s.events:
        if e.src is None:
            assert e.job_id not in last and e.dst is S.QUEUED
        else:
            assert last[e.job_id] is e.src
        assert e.actor and isinstance(e.time, float)
        last[e.job_id] = e.dst
    assert last == {j.id: j.state for j in s.jobs.values()}


def play(policy, nodes, tenants, ops, check=True, estimate=True):
    """Apply `ops` to a new scheduler. With `estimate`, each "estimate" also goes on with a copy of the
    scheduler (`fork`, what an estimate runs forward), so a copy that lost or shared any state shows as
    a different transcript; `s.events` then holds every event, the originals' too."""
    s = build(nodes, tenants, policy)
    now = 0.0
    transcript = []
    earlier: list = []  # the events of the schedulers left behind
    for op in ops:
        now, what = apply(s, op, now, len(tenants), estimate)
        transcript.append(what)
        if estimate and op[0] == "estimate":
            earlier += s.events
            s = fork(s)
        if check:
            check_invariants(s)
    s.events[:0] = earlier
    if check:
        check_history(s)
    return s, transcript


@pytest.mark.parametrize("policy", POLICIES)
@SETTINGS
@given(nodes=nodes_st, tenants=tenants_st, ops=ops_st)
def test_books_balance_and_replay_is_identical(policy, nodes, tenants, ops):
    """... and the same without the estimated starts asked on the way: the policy run forward on a copy
    (core/lookahead.py) leaves the scheduler, its policy's state included, as it was; and the copy goes on
    as the original would."""
    s1, t1 = play(policy, nodes, tenants, ops)
    s2, t2 = play(policy, nodes, tenants, ops, check=False, estimate=False)
    assert t1 == t2
    assert s1.events == s2.events


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=20 * SCALE, deadline=None)
@given(nodes=nodes_st, tenants=tenants_st, seed=st.integers(0, 2**32 - 1))
def test_busy_long_runs_keep_the_books(policy, nodes, tenants, seed):
    """Longer, busier runs than the op lists: every tick jobs arrive, some end, a pass runs."""
    rng = random.Random(seed)
    s = build(nodes, tenants, policy)
    now = 0.0
    for _ in range(120):
        now += rng.choice((0.0, 1.0, 5.0))
        for _ in range(rng.randint(0, 3)):
            spec = JobSpec(
                "nb",
                gpus=rng.choice((1, 1, 2, 4, 8)),
                priority=rng.choice(list(Priority)),
                tenant=f"t{rng.randrange(len(tenants))}",
                est_runtime=rng.choice((None, 10.0, 50.0)),
                preemptible=rng.random() < 0.3,
            )
            try:
                s.submit(spec, now)
            except SpecError:
                pass
        for job in list(s.active.values()):
            roll = rng.random()
            if job.state is S.ADMITTED and roll < 0.8:
                s.started(job.id, now)
            elif job.state is S.RUNNING and roll < 0.2:
                s.finished(job.id, now, ok=roll < 0.18)
            elif roll > 0.995:
                s.lost(job.id, now)
        for d in s.schedule(now):
            assert not isinstance(d, Admit) or s.jobs[d.job_id].state is S.ADMITTED
        check_invariants(s)
    check_history(s)


def _transcript_digest(seed: int) -> str:
    """Run a seeded scenario under every policy; return a digest of all decisions and events."""
    code = f"""
import hashlib, random
from jupyter_gpusched.core import *
out = []
for policy in policy_names():
    rng = random.Random({seed})
    c = Cluster([NodeSpec(f"n{{i}}", rng.choice((2, 4, 8)), "spot" if i % 3 == 0 else "od") for i in range(12)],
                [Pool("spot", spot=True)])
    s = Scheduler(c, [Tenant(f"t{{i}}", 6, rng.choice((None, 4))) for i in range(4)], policy)
    for step in range(150):
        now = float(step)
        for _ in range(rng.randint(0, 3)):
            try:
                s.submit(JobSpec("nb", gpus=rng.choice((1, 2, 4, 8)), priority=rng.choice(list(Priority)),
                                 tenant=f"t{{rng.randrange(5)}}", est_runtime=rng.choice((None, 20.0)),
                                 preemptible=rng.random() < 0.3), now)
            except SpecError:
                pass
        for j in sorted(s.active.values(), key=lambda j: j.seq):
            if j.state is JobState.ADMITTED:
                s.started(j.id, now)
            elif rng.random() < 0.1:
                s.finished(j.id, now, ok=True)
        out.append(repr(s.schedule(now)))
    out.append(repr(s.events))
print(hashlib.sha256("\\n".join(out).encode()).hexdigest())
"""
    digests = set()
    for hash_seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        digests.add(done.stdout.strip())
    return digests


def test_decisions_do_not_depend_on_hash_order():
    """Same inputs, same decisions, in separate processes with different string hashing."""
    digests = _transcript_digest(2024)
    assert len(digests) == 1


# --- no starvation under aging (dynamic) ------------------------------------------------------------------
@settings(max_examples=60 * SCALE, deadline=None)
@given(
    n_nodes=st.integers(1, 3),
    gpus_per_node=st.integers(1, 4),
    low_gpus=st.integers(1, 4),
    aging=st.sampled_from((10.0, 25.0, 60.0)),
    r_max=st.integers(2, 20),
    estimates=st.sampled_from(("none", "exact", "max_runtime")),
    low_priority=st.sampled_from((Priority.LOW, Priority.NORMAL)),
    short_first=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_aging_bounds_the_wait_of_a_low_priority_job(
    n_nodes, gpus_per_node, low_gpus, aging, r_max, estimates, low_priority, short_first, seed
):
    """Bound tested: admitted_at(L) <= submitted_at(L) + starvation_bound(p) + 2 x R_max.

    Setting: dynamic policy, one tenant, C = n_nodes x gpus_per_node GPUs kept saturated by a
    closed-loop stream of 1-GPU HIGH jobs (every job that ends is replaced at that instant, so
    there is never a backlog of jobs that arrived before L's aged virtual time), each with a
    runtime in [1, R_max]; a pass runs at every arrival/finish. L (low_gpus <= gpus_per_node,
    priority LOW or NORMAL) arrives when the cluster is full. After submitted_at + bound every
    new arrival is ordered behind L, so at the first pass with free GPUs L is at the head: it
    either fits, or reserves the node that drains first. The reservation holds its node at the
    latest once the jobs there when it was made have ended (within R_max; jobs started there
    since have run less than it has waited, so are expected to end within that wait); from
    then on backfill onto it is only allowed for jobs whose estimate ends before the reserved
    start (never for jobs without one), so L starts within another R_max.
    Under `priority` (no aging) the same stream starves L (see test_core_scheduler)."""
    low_gpus = min(low_gpus, gpus_per_node)
    rng = random.Random(seed)
    s = Scheduler(
        Cluster([NodeSpec(f"n{i}", gpus_per_node) for i in range(n_nodes)]),
        [Tenant("t", n_nodes * gpus_per_node)],
        "dynamic",
        SchedulerConfig(aging_interval=aging, short_first=short_first),
    )
    ends: dict[str, float] = {}

    def high(now: float) -> None:
        runtime = float(rng.randint(1, r_max))
        extra = {"none": {}, "exact": {"est_runtime": runtime}, "max_runtime": {"max_runtime": float(r_max)}}
        job = s.submit(JobSpec("h", gpus=1, priority=Priority.HIGH, tenant="t", **extra[estimates]), now)
        ends[job.id] = runtime  # a runtime until it starts, then an end time

    def pass_at(now: float) -> None:
        for d in s.schedule(now):
            if isinstance(d, Admit):
                s.started(d.job_id, now)
                if d.job_id in ends:
                    ends[d.job_id] = now + ends[d.job_id]

    for _ in range(n_nodes * gpus_per_node):
        high(0.0)
    pass_at(0.0)
    assert s.cluster.free_gpus == 0
    t0 = rng.uniform(0.0, r_max)
    low = s.submit(JobSpec("low", gpus=low_gpus, priority=low_priority, tenant="t"), t0)
    pass_at(t0)
    bound = t0 + starvation_bound(low_priority, aging) + 2 * r_max
    while low.state is S.QUEUED:
        now = min(ends[j] for j in s.active if j in ends)
        assert now <= bound, f"low job still waiting at {now}, bound {bound}"
        for jid in [j for j in list(s.active) if ends.get(j) == now]:
            s.finished(jid, now, ok=True)
            del ends[jid]
            high(now)
        pass_at(now)
    assert low.admitted_at <= bound


def test_a_standing_backlog_adds_its_drain_time_to_the_bound():
    """The bound above assumes no backlog of older work. With one standing, it grows by the
    backlog's drain time: C GPUs, runtime R, C HIGH jobs arriving every R plus a standing
    backlog of K jobs, so at submitted_at + starvation_bound up to K + C jobs are still ordered
    ahead of L. L then starts by submitted_at + bound + (ceil(K / C) + 1) * R, not + R.
    This is the design's bound (queues.py): aging bounds how late a job can be *passed*; how
    long the work already ahead of it takes depends on the load, not on the scheduler."""
    C, R, K, aging = 2, 10.0, 2, 100.0
    s = Scheduler(Cluster([NodeSpec("n0", C)]), [], "dynamic", SchedulerConfig(aging_interval=aging))

    def pass_at(now: float) -> None:
        for d in s.schedule(now):
            s.started(d.job_id, now)

    for _ in range(C + K):
        s.submit(JobSpec("h", priority=Priority.HIGH, est_runtime=R), 0.0)
    pass_at(0.0)
    low = s.submit(JobSpec("low", priority=Priority.LOW), 5.0)
    pass_at(5.0)
    t = 0.0
    while low.state is S.QUEUED:
        t += R
        for jid in list(s.active):
            s.finished(jid, t, ok=True)
        for _ in range(C):
            s.submit(JobSpec("h", priority=Priority.HIGH, est_runtime=R), t)
        pass_at(t)
        assert t < 1000
    b = starvation_bound(Priority.LOW, aging)
    assert low.admitted_at > 5.0 + b + R  # the simple bound does not hold here
    assert low.admitted_at <= 5.0 + b + (math.ceil(K / C) + 1) * R


@given(
    quota=st.integers(0, 16),
    burst=st.one_of(st.none(), st.integers(0, 16)),
    used=st.integers(0, 40),
    borrowing=st.booleans(),
    budget=st.sampled_from([None, "soft", "hard"]),
)
def test_admissible_is_classify_for_every_size(quota, burst, used, borrowing, budget):
    # spot-hybrid sizes its pool from it instead of classifying each queued size
    ledger = QuotaLedger([Tenant("t", quota, burst)], allow_borrowing=borrowing)
    ledger.used["t"] = used
    if budget:
        ledger.over_budget["t"] = budget
    room = ledger.admissible("t")
    for gpus in range(0, 64):
        assert (gpus <= room) == (ledger.classify("t", gpus) is not Admission.OVER_LIMIT), gpus
