"""The core under another system's admission (Kueue): its pass decides nothing, and it books what it is told."""

from __future__ import annotations

from jupyter_gpusched.core import Cluster, JobSpec, JobState, NodeSpec, Scheduler, Tenant
from jupyter_gpusched.core.policies import policy_names
from jupyter_gpusched.core.policies.external import ExternalAdmission


def external(sizes=(8, 8), tenants=(Tenant("a", 8, None),)) -> Scheduler:
    return Scheduler(Cluster([NodeSpec(f"n{i}", g) for i, g in enumerate(sizes)]), tenants, ExternalAdmission())


def test_the_pass_admits_nothing_and_the_policy_cannot_be_picked_by_name():
    s = external()
    job = s.submit(JobSpec("nb.ipynb", gpus=1, tenant="a"), now=0)
    assert s.schedule(now=1) == [] and job.state is JobState.QUEUED
    assert "external" not in policy_names()  # a sweep never replays a policy that never admits


def test_an_observed_admission_takes_free_gpus_of_those_nodes_and_marks_borrowing():
    s = external()
    first = s.submit(JobSpec("nb.ipynb", gpus=8, tenant="a"), now=0)
    second = s.submit(JobSpec("nb.ipynb", gpus=8, tenant="a"), now=0)
    s.admit_observed(first.id, {"n0": 8}, now=1, reason="admitted by kueue on n0 (8 GPUs)")
    s.started(first.id, now=1)
    assert first.state is JobState.RUNNING and first.allocation == (("n0", tuple(range(8))),)
    assert not first.borrowed and s.cluster.free_on("n0") == 0
    s.admit_observed(second.id, {"n1": 8, "gone": 2}, now=2, reason="admitted")  # a node the books lack is left out
    assert second.allocation == (("n1", tuple(range(8))),) and second.borrowed  # past tenant a's quota of 8
    assert s.ledger.used["a"] == 16 and s.schedule(now=3) == []  # booked, and nothing left for a driver to do
    s.finished(first.id, now=4, ok=True)
    assert s.cluster.free_on("n0") == 8


def test_the_books_are_never_overdrawn_by_a_stale_report():
    s = external(sizes=(4,))
    a = s.submit(JobSpec("nb.ipynb", gpus=4, tenant="a"), now=0)
    b = s.submit(JobSpec("nb.ipynb", gpus=2, tenant="a"), now=0)
    s.admit_observed(a.id, {"n0": 4}, now=1, reason="admitted")
    s.admit_observed(b.id, {"n0": 2}, now=1, reason="admitted")  # the books show no GPU free on n0
    assert b.state is JobState.ADMITTED and b.allocation == ()
    assert s.cluster.free_gpus == 0


def test_a_tenant_s_terms_can_be_replaced_by_the_other_system_s():
    s = external()
    s.set_tenant(Tenant("a", 16, 0))
    assert s.ledger.tenant("a").quota == 16 and s.ledger.limit("a") == 16
