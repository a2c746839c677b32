"""CPUs and memory beside GPUs: a node that counts them admits a job only while they are free (pure core)."""

from __future__ import annotations

import pytest

from jupyter_gpusched.core import Cluster, JobSpec, JobState, Scheduler, SpecError, Tenant
from jupyter_gpusched.core.model import NodeSpec


def test_a_node_that_counts_cpus_and_memory_places_only_what_fits():
    c = Cluster([NodeSpec("n", 8, cpus=4, memory=1000)])
    first = c.place(1, cpus=3, memory=600)
    assert first is not None
    c.take(first, 3, 600)
    assert c.place(1, cpus=2) is None, "1 CPU left"
    assert c.place(1, memory=500) is None, "400 MiB left"
    assert c.place(1, cpus=1, memory=400) is not None
    c.release(first, 3, 600)
    assert c.place(1, cpus=4, memory=1000) is not None


def test_a_node_that_does_not_count_them_never_refuses_for_them():
    c = Cluster([NodeSpec("n", 2)])
    alloc = c.place(1, cpus=1000, memory=10**6)
    assert alloc is not None
    c.take(alloc, 1000, 10**6)
    assert c.place(1, cpus=1000, memory=10**6) is not None
    assert c.cpus_memory_problem(1000, 10**6) is None


def test_best_fit_skips_a_node_without_room_for_the_cpus():
    c = Cluster([NodeSpec("small", 2, cpus=1), NodeSpec("big", 4, cpus=16)])
    assert c.place(1) == (("small", (0,)),)  # fewest free GPUs first
    assert c.place(1, cpus=2) == (("big", (0,)),)


def test_a_job_that_would_overload_the_machine_waits_and_starts_when_room_is_back():
    s = Scheduler(Cluster([NodeSpec("local", 8, cpus=2, memory=4096)]), [Tenant("t", quota=8)], "fifo")
    jobs = [s.submit(JobSpec("nb.ipynb", tenant="t", cpus=1, memory=1024), now=0) for _ in range(3)]
    s.schedule(1)
    assert [j.state for j in jobs] == [JobState.ADMITTED, JobState.ADMITTED, JobState.QUEUED]
    s.started(jobs[0].id, 2)
    s.finished(jobs[0].id, 3, ok=True)
    s.schedule(4)
    assert jobs[2].state is JobState.ADMITTED


@pytest.mark.parametrize(
    ("cpus", "memory", "field"),
    [(3, 0, "cpus"), (0, 5000, "memory"), (-1, 0, "cpus"), (0, -1, "memory"), (float("nan"), 0, "cpus")],
)
def test_an_ask_no_node_could_hold_is_refused_at_submit(cpus, memory, field):
    s = Scheduler(Cluster([NodeSpec("local", 8, cpus=2, memory=4096)]), [Tenant("t", quota=8)], "fifo")
    with pytest.raises(SpecError) as err:
        s.validate(JobSpec("nb.ipynb", tenant="t", cpus=cpus, memory=memory))
    assert err.value.field == field
