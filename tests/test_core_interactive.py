"""The interactive class in the core: GPU kernels' requests share the queue, quotas and aging
with jobs, are never preempted or borrowed, and are capped by a tenant's interactive share."""

from __future__ import annotations

import pytest

from jupyter_gpusched.core import (
    Admit,
    Cluster,
    JobSpec,
    JobState,
    NodeSpec,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
    Tenant,
    policy_names,
)
from jupyter_gpusched.core.health import HealthConfig, lost_jobs

S = JobState


def sched(gpus=4, tenants=(), policy="dynamic", **config) -> Scheduler:
    return Scheduler(Cluster([NodeSpec("n0", gpus)]), tenants, policy, SchedulerConfig(**config))


def kernel(gpus=1, tenant="a", **kw) -> JobSpec:
    return JobSpec("", gpus=gpus, tenant=tenant, interactive=True, **kw)


def batch(gpus=1, tenant="a", **kw) -> JobSpec:
    return JobSpec("nb.ipynb", gpus=gpus, tenant=tenant, **kw)


def admitted(decisions) -> list[str]:
    return [d.job_id for d in decisions if isinstance(d, Admit)]


def test_interactive_share_caps_kernels_but_not_jobs():
    s = sched(8, [Tenant("a", 8, interactive_share=0.5)])
    kernels = [s.submit(kernel(), 0.0) for _ in range(5)]
    jobs = [s.submit(batch(), 0.0) for _ in range(3)]
    s.schedule(1.0)
    assert [k.state for k in kernels] == [S.ADMITTED] * 4 + [S.QUEUED]  # 4 = half of quota 8
    assert all(j.state is S.ADMITTED for j in jobs)  # the capped kernel does not block the tenant's jobs
    view = s.queues_view()["a"]
    assert (view["interactive"], view["interactive_cap"]) == (4, 4)
    assert (view["interactive_running"], view["interactive_queued"], view["running"]) == (4, 1, 7)
    s.cancel(kernels[0].id, 2.0)
    s.schedule(3.0)
    assert kernels[4].state is S.ADMITTED  # the cap counts held kernels only
    assert s.ledger.interactive["a"] == 4


def test_interactive_never_borrows_and_is_never_reclaimed():
    s = sched(4, [Tenant("a", 1), Tenant("b", 3)])
    k1, k2 = s.submit(kernel(), 0.0), s.submit(kernel(), 0.0)
    s.schedule(1.0)
    assert (k1.state, k2.state) == (S.ADMITTED, S.QUEUED)  # past its quota: waits, never borrows
    s.started(k1.id, 1.0)
    b = s.submit(batch(1, tenant="a"), 2.0)  # a's batch job borrows b's idle GPUs
    s.schedule(3.0)
    assert b.state is S.ADMITTED and b.borrowed
    owners = [s.submit(batch(1, tenant="b"), 4.0) for _ in range(3)]
    s.schedule(5.0)
    assert b.state is S.QUEUED and b.preemptions == 1  # the borrower is reclaimed...
    assert k1.state is S.RUNNING  # ...the kernel is not
    assert [o.state for o in owners] == [S.ADMITTED] * 3


@pytest.mark.parametrize("policy", ["tiresias", "srpt"])
def test_preemptive_policies_never_preempt_a_kernel(policy):
    if policy not in policy_names():
        pytest.skip(f"no {policy} policy")
    s = sched(2, [Tenant("a", 2)], policy)
    k = s.submit(kernel(2), 0.0)
    s.schedule(0.0)
    s.started(k.id, 0.0)
    s.submit(batch(2, est_runtime=1.0, priority=Priority.HIGH), 100.0)
    s.schedule(5000.0)
    assert k.state is S.RUNNING and k.preemptions == 0


def test_interactive_ages_like_a_job():
    """Same aging rules: an old low-priority kernel passes a newer high-priority job."""
    s = sched(1, [Tenant("a", 1)], aging_interval=100.0)
    holder = s.submit(batch(1), 0.0)
    s.schedule(0.0)
    k = s.submit(kernel(priority=Priority.LOW), 0.0)
    late = s.submit(batch(1, priority=Priority.HIGH), 250.0)  # key 50 > the kernel's 0
    s.cancel(holder.id, 300.0)
    assert admitted(s.schedule(300.0)) == [k.id]
    assert late.state is S.QUEUED


def test_validation_of_interactive_requests():
    s = sched(8, [Tenant("a", 4, interactive_share=0.5)])
    with pytest.raises(SpecError) as e:
        s.validate(kernel(3))
    assert e.value.field == "gpus" and "interactive" in e.value.message
    with pytest.raises(SpecError) as e:
        s.validate(kernel(1, preemptible=True))
    assert e.value.field == "preemptible"
    s.validate(kernel(2))
    assert Tenant("t", 3, interactive_share=0.5).interactive_cap == 1
    assert Tenant("t", 3).interactive_cap == 3


def test_a_kernel_is_never_declared_lost_for_lack_of_heartbeats():
    s = sched(2, [Tenant("a", 2)])
    k, j = s.submit(kernel(), 0.0), s.submit(batch(), 0.0)
    s.schedule(0.0)
    s.started(k.id, 0.0)
    s.started(j.id, 0.0)
    assert lost_jobs(list(s.active.values()), {}, 10_000.0, HealthConfig()) == [j.id]
