"""Pipelines in the core: WAITING jobs, their release into the queue, and cascading cancellation."""

from __future__ import annotations

import pytest

from jupyter_gpusched.core import (
    Admit,
    Cluster,
    IllegalTransition,
    JobSpec,
    JobState,
    NodeSpec,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
)
from jupyter_gpusched.core.dependencies import Doom, Release, check_edges, settle, verdict
from jupyter_gpusched.core.model import transition

S = JobState


def sched(gpus=1, **config) -> Scheduler:
    return Scheduler(Cluster([NodeSpec("n0", gpus)]), (), "dynamic", SchedulerConfig(**config))


def spec(**kw) -> JobSpec:
    return JobSpec("nb.ipynb", **kw)


def apply(s: Scheduler, now: float) -> None:
    """What the service does on a job-end event."""
    waiting = [j for j in s.jobs.values() if j.state is S.WAITING]
    for d in settle(waiting, {j.id: j.state for j in s.jobs.values()}):
        if isinstance(d, Release):
            s.release(d.job_id, now)
        else:
            s.cancel(d.job_id, now, actor="scheduler", reason=d.message)


def test_a_job_with_dependencies_waits_outside_the_queue():
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,)), 1.0)
    assert b.state is S.WAITING
    assert s.position(b.id) is None and len(s.queue) == 1
    assert s.events[-1].dst is S.WAITING and a.id in s.events[-1].reason


def test_waiting_may_only_be_released_or_cancelled():
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,)), 0.0)
    for dst in (S.ADMITTED, S.RUNNING, S.SUCCEEDED, S.FAILED):
        with pytest.raises(IllegalTransition):
            transition(b, dst, 1.0)
    assert b.state is S.WAITING


def test_release_after_success_and_the_queue_clock_starts_at_release():
    s = sched(aging_interval=60.0)
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,), priority=Priority.LOW), 0.0)
    s.schedule(0.0)
    s.started(a.id, 1.0)
    s.finished(a.id, 500.0, ok=True)
    apply(s, 500.0)
    assert b.state is S.QUEUED and s.position(b.id) == 0
    # Aging and queueing delay count from the release, not from the submission 500 s earlier.
    assert b.submitted_at == 500.0
    late = s.submit(spec(priority=Priority.NORMAL), 510.0)  # submitted after b's release, one class higher
    # b has waited 10 s in the queue: not enough (60 s a class) to pass a NORMAL job.
    assert [j.id for j in s.queue][:2] == [late.id, b.id]


def test_failure_cancels_dependants_in_a_cascade_with_a_message_naming_it():
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,)), 0.0)
    c = s.submit(spec(after=(b.id,)), 0.0)
    d = s.submit(spec(after=(a.id,), when="ended"), 0.0)
    s.schedule(0.0)
    s.finished(a.id, 2.0, ok=False, reason="boom")
    apply(s, 2.0)
    assert b.state is S.CANCELLED and a.id in b.reason and "failed" in b.reason
    assert c.state is S.CANCELLED and b.id in c.reason and "cancelled" in c.reason
    assert d.state is S.QUEUED  # "ended": any end releases it


def test_cancelled_dependency_dooms_and_unknown_dependency_keeps_waiting():
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,)), 0.0)
    x = s.submit(spec(after=("nosuchjob",)), 0.0)
    s.cancel(a.id, 1.0)
    apply(s, 1.0)
    assert b.state is S.CANCELLED
    assert x.state is S.WAITING


def test_all_dependencies_must_end():
    s = sched(gpus=2)
    a, b = s.submit(spec(), 0.0), s.submit(spec(), 0.0)
    c = s.submit(spec(after=(a.id, b.id)), 0.0)
    decisions = s.schedule(0.0)
    assert {d.job_id for d in decisions if isinstance(d, Admit)} == {a.id, b.id}
    s.started(a.id, 1.0)
    s.started(b.id, 1.0)
    s.finished(a.id, 3.0, ok=True)
    apply(s, 3.0)
    assert c.state is S.WAITING
    s.finished(b.id, 4.0, ok=True)
    apply(s, 4.0)
    assert c.state is S.QUEUED


def test_verdict_and_settle_are_pure():
    s = sched()
    a = s.submit(spec(), 0.0)
    b = s.submit(spec(after=(a.id,)), 0.0)
    states = {a.id: S.FAILED, b.id: S.WAITING}
    assert verdict(b, states) == Doom(b.id, a.id, S.FAILED)
    assert b.state is S.WAITING  # nothing applied
    assert settle([b], {a.id: S.SUCCEEDED}) == [Release(b.id)]


def test_bad_when_is_refused():
    with pytest.raises(SpecError) as err:
        sched().submit(spec(after=("x",), when="sometimes"), 0.0)
    assert err.value.field == "when"


def test_check_edges():
    assert check_edges(4, [[0, 1], [0, 2], [1, 3]]) == [[], [0], [0], [1]]
    with pytest.raises(ValueError, match="cycle"):
        check_edges(3, [[0, 1], [1, 2], [2, 1]])
    with pytest.raises(ValueError, match="does not exist"):
        check_edges(2, [[0, 5]])
    with pytest.raises(ValueError, match="itself"):
        check_edges(2, [[1, 1]])
    with pytest.raises(ValueError, match="pair"):
        check_edges(2, [[0]])
