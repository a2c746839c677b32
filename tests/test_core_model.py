"""The core's vocabulary: the lifecycle table and its one transition function, priorities,
tenants, the quota ledger and the ordered queue."""

from __future__ import annotations

import math

import pytest

from jupyter_gpusched.core.model import (
    ALLOWED_TRANSITIONS,
    TERMINAL_STATES,
    Event,
    IllegalTransition,
    Job,
    JobSpec,
    JobState,
    Priority,
    Tenant,
    transition,
)
from jupyter_gpusched.core.queues import (
    JobQueue,
    aged_key,
    fifo_key,
    starvation_bound,
    strict_priority_key,
)
from jupyter_gpusched.core.quotas import Admission, QuotaLedger

S = JobState

# The lifecycle written out independently of the code (DESIGN.md "Job lifecycle", plus the
# moves the scheduler needs: an admitted job the backend could not start goes back in line,
# an admitted job can be preempted, lost, failed or cancelled before it runs).
EXPECTED = {
    S.WAITING: {S.QUEUED, S.CANCELLED},  # issue 14: released when its dependencies end, or cancelled
    S.QUEUED: {S.ADMITTED, S.CANCELLED, S.FAILED},
    S.ADMITTED: {S.RUNNING, S.QUEUED, S.PREEMPTED, S.LOST, S.FAILED, S.CANCELLED},
    S.RUNNING: {S.SUCCEEDED, S.FAILED, S.CANCELLED, S.PREEMPTED, S.LOST},
    S.PREEMPTED: {S.QUEUED, S.CANCELLED},
    S.LOST: {S.QUEUED, S.FAILED, S.CANCELLED},
    S.SUCCEEDED: set(),
    S.FAILED: set(),
    S.CANCELLED: set(),
}

ALL_PAIRS = [(src, dst) for src in JobState for dst in JobState]
LEGAL = [(src, dst) for src, dst in ALL_PAIRS if dst in EXPECTED[src]]
ILLEGAL = [(src, dst) for src, dst in ALL_PAIRS if dst not in EXPECTED[src]]


def make_job(state: JobState = S.QUEUED, **spec) -> Job:
    return Job(id="j1", spec=JobSpec("nb.ipynb", **spec), submitted_at=5.0, seq=0, state=state)


def job_fields(job: Job) -> tuple:
    return (
        job.state,
        job.reason,
        job.admitted_at,
        job.started_at,
        job.first_started_at,
        job.finished_at,
        job.attempts,
    )


# --- the transition table ------------------------------------------------------------------
def test_table_matches_the_design():
    assert {k: set(v) for k, v in ALLOWED_TRANSITIONS.items()} == EXPECTED
    assert set(ALLOWED_TRANSITIONS) == set(JobState)


def test_terminal_states_have_no_way_out_and_hold_no_gpus():
    assert TERMINAL_STATES == {S.SUCCEEDED, S.FAILED, S.CANCELLED}
    for state in JobState:
        assert state.terminal == (state in TERMINAL_STATES)
        assert state.holds_gpus == (state in (S.ADMITTED, S.RUNNING))
        if state.terminal:
            assert not ALLOWED_TRANSITIONS[state]


@pytest.mark.parametrize(("src", "dst"), LEGAL, ids=[f"{a.value}->{b.value}" for a, b in LEGAL])
def test_every_legal_move_records_an_event(src, dst):
    job = make_job(src)
    event = transition(job, dst, 42.0, reason="because", actor="tester")
    assert event == Event("j1", 42.0, src, dst, "because", "tester")
    assert job.state is dst
    assert job.reason == "because"


@pytest.mark.parametrize(("src", "dst"), ILLEGAL, ids=[f"{a.value}->{b.value}" for a, b in ILLEGAL])
def test_every_illegal_move_raises_and_changes_nothing(src, dst):
    job = make_job(src)
    before = job_fields(job)
    with pytest.raises(IllegalTransition) as info:
        transition(job, dst, 42.0, reason="nope", actor="tester")
    assert info.value.job_id == "j1"
    assert info.value.src is src
    assert info.value.dst is dst
    assert src.value in str(info.value) and dst.value in str(info.value)
    assert isinstance(info.value, ValueError)
    assert job_fields(job) == before


def test_default_actor_is_the_scheduler():
    event = transition(make_job(), S.ADMITTED, 1.0)
    assert event.actor == "scheduler"
    assert event.reason == ""


def test_transition_stamps_times_and_attempts():
    job = make_job()
    transition(job, S.ADMITTED, 10.0)
    assert (job.admitted_at, job.attempts) == (10.0, 1)
    transition(job, S.RUNNING, 12.0)
    assert (job.started_at, job.first_started_at) == (12.0, 12.0)
    transition(job, S.PREEMPTED, 20.0)
    transition(job, S.QUEUED, 20.0)
    transition(job, S.ADMITTED, 30.0)
    transition(job, S.RUNNING, 31.0)
    assert job.attempts == 2
    assert job.started_at == 31.0
    assert job.first_started_at == 12.0  # queueing delay ends at the first start
    assert job.finished_at is None
    transition(job, S.SUCCEEDED, 40.0)
    assert job.finished_at == 40.0


def test_first_start_at_time_zero_is_kept():
    job = make_job()
    transition(job, S.ADMITTED, 0.0)
    transition(job, S.RUNNING, 0.0)
    transition(job, S.PREEMPTED, 1.0)
    transition(job, S.QUEUED, 1.0)
    transition(job, S.ADMITTED, 2.0)
    transition(job, S.RUNNING, 2.0)
    assert job.first_started_at == 0.0


# --- small value types -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [("high", Priority.HIGH), (" Normal ", Priority.NORMAL), ("LOW", Priority.LOW), (Priority.HIGH, Priority.HIGH)],
)
def test_priority_parse(value, expected):
    assert Priority.parse(value) is expected


@pytest.mark.parametrize("value", ["urgent", "", None, 2.5])
def test_priority_parse_rejects(value):
    with pytest.raises(ValueError, match="high, normal, low"):
        Priority.parse(value)


def test_priority_order_and_label():
    assert Priority.LOW < Priority.NORMAL < Priority.HIGH
    assert [p.label for p in Priority] == ["low", "normal", "high"]


def test_tenant_limit():
    assert Tenant("a", 4).limit == math.inf
    assert Tenant("a", 4, burst=2).limit == 6
    assert Tenant("a", 4, burst=0).limit == 4


def test_runtime_estimate_prefers_the_explicit_estimate():
    assert JobSpec("n").runtime_estimate is None
    assert JobSpec("n", max_runtime=100.0).runtime_estimate == 100.0
    assert JobSpec("n", max_runtime=100.0, est_runtime=30.0).runtime_estimate == 30.0


def test_job_views():
    job = make_job(gpus=3, tenant="t")
    job.allocation = (("n0", (0, 1)), ("n1", (0,)))
    assert (job.gpus, job.tenant, job.nodes) == (3, "t", ("n0", "n1"))


# --- quota ledger ---------------------------------------------------------------------------
def test_ledger_within_quota_borrow_over_limit():
    ledger = QuotaLedger([Tenant("a", 4, burst=2)])
    assert ledger.classify("a", 4) is Admission.WITHIN_QUOTA
    assert ledger.classify("a", 5) is Admission.BORROW
    assert ledger.classify("a", 6) is Admission.BORROW
    assert ledger.classify("a", 7) is Admission.OVER_LIMIT
    ledger.charge("a", 3, borrowed=False)
    assert ledger.classify("a", 1) is Admission.WITHIN_QUOTA
    assert ledger.classify("a", 2) is Admission.BORROW  # a job straddling the quota borrows as a whole
    ledger.charge("a", 2, borrowed=True)
    assert ledger.used["a"] == 5 and ledger.borrowed["a"] == 2
    assert ledger.classify("a", 1) is Admission.BORROW
    assert ledger.classify("a", 2) is Admission.OVER_LIMIT
    ledger.refund("a", 2, borrowed=True)
    assert ledger.used["a"] == 3 and ledger.borrowed["a"] == 0
    assert ledger.limit("a") == 6


def test_ledger_unlimited_burst():
    ledger = QuotaLedger([Tenant("a", 1)])
    ledger.charge("a", 1000, borrowed=True)
    assert ledger.classify("a", 1000) is Admission.BORROW
    assert ledger.limit("a") == math.inf


def test_static_ledger_never_borrows():
    ledger = QuotaLedger([Tenant("a", 4, burst=100)], allow_borrowing=False)
    assert ledger.classify("a", 4) is Admission.WITHIN_QUOTA
    assert ledger.classify("a", 5) is Admission.OVER_LIMIT
    ledger.charge("a", 4, borrowed=False)
    assert ledger.classify("a", 1) is Admission.OVER_LIMIT
    assert ledger.limit("a") == 4


def test_unknown_tenant_may_only_borrow_and_is_not_configured_by_looking():
    ledger = QuotaLedger([Tenant("a", 2)], unknown_burst=3)
    assert ledger.classify("ghost", 1) is Admission.BORROW
    assert ledger.classify("ghost", 4) is Admission.OVER_LIMIT
    assert ledger.limit("ghost") == 3
    assert set(ledger.tenants) == {"a"}  # looking a tenant up does not configure it
    ledger.charge("ghost", 1, borrowed=True)
    snap = ledger.snapshot()
    assert snap["ghost"] == {"quota": 0, "burst": 3, "used": 1, "borrowed": 1, "interactive": 0, "interactive_cap": 0}
    assert snap["a"] == {"quota": 2, "burst": None, "used": 0, "borrowed": 0, "interactive": 0, "interactive_cap": 2}


# --- the queue ------------------------------------------------------------------------------
def _job(i: int, t: float, prio: Priority = Priority.NORMAL) -> Job:
    return Job(id=f"j{i}", spec=JobSpec("n", priority=prio), submitted_at=t, seq=i)


def test_queue_orders_by_key_and_breaks_ties_by_seq():
    q = JobQueue(fifo_key)
    for job in [_job(2, 5.0), _job(0, 5.0), _job(1, 1.0)]:
        q.push(job)
    assert [j.id for j in q] == ["j1", "j0", "j2"]
    assert len(q) == 3 and "j0" in q and q.position("j2") == 2


def test_queue_remove_while_iterating_and_duplicates():
    q = JobQueue(fifo_key)
    jobs = [_job(i, float(i)) for i in range(200)]
    for job in jobs:
        q.push(job)
    with pytest.raises(ValueError):
        q.push(jobs[0])
    seen = []
    for job in q:
        seen.append(job.id)
        q.remove(job.id)  # compaction kicks in part-way through
    assert seen == [j.id for j in jobs]
    assert len(q) == 0 and list(q) == [] and q.position("j0") is None
    q.remove("never-there")
    q.push(jobs[5])  # a removed job can come back
    assert [j.id for j in q] == ["j5"]


def test_a_walk_that_stops_at_the_head_skips_no_departed_jobs():
    """Jobs leaving from the head (fifo's starts) leave no stale entries in front: a walk that
    stops at its first job costs one step, not one per job started since the last compaction
    (fifo's 70k-job replay spent 230 of its 350 s skipping them)."""
    q = JobQueue(fifo_key)
    jobs = [_job(i, float(i)) for i in range(1000)]
    for job in jobs:
        q.push(job)
    q.remove("j500")  # one from the middle stays stale until compaction
    for _ in range(400):
        next(iter(q))  # a walk that looks at the head only, while it is under way
        for head in q:
            q.remove(head.id)
            break
    assert [j.id for j in q][:2] == ["j400", "j401"] and len(q) == 599
    assert q._entries[0][2].id == "j400" and len(q._entries) == 600


def test_strict_priority_key():
    q = JobQueue(strict_priority_key)
    q.push(_job(0, 0.0, Priority.LOW))
    q.push(_job(1, 10.0, Priority.HIGH))
    q.push(_job(2, 5.0, Priority.NORMAL))
    q.push(_job(3, 1.0, Priority.HIGH))
    assert [j.id for j in q] == ["j3", "j1", "j2", "j0"]


def test_aged_key_is_a_priority_head_start():
    key = aged_key(100.0)
    low = _job(0, 0.0, Priority.LOW)
    assert key(_job(1, 199.0, Priority.HIGH)) < key(low)  # within the head start: goes first
    assert key(_job(2, 200.0, Priority.HIGH)) > key(low)  # same virtual time: the older job wins
    assert key(_job(3, 100.0, Priority.NORMAL)) > key(low)
    assert starvation_bound(Priority.LOW, 100.0) == 200.0
    assert starvation_bound(Priority.NORMAL, 100.0) == 100.0
    assert starvation_bound(Priority.HIGH, 100.0) == 0.0
