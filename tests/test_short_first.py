"""`short_first` (issue 12): expected-short jobs get a head start within their class, and the
no-starvation bound of queues.py holds exactly as without it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpusched.core import Cluster, JobSpec, NodeSpec, Priority, Scheduler, SchedulerConfig, Tenant
from jupyter_gpusched.core.model import Job
from jupyter_gpusched.core.queues import aged_key, short_head_start, starvation_bound
from jupyter_gpusched.sim.scenario import ScenarioError, find_scenario, scenario_from_dict, traces_dir

A = 3600.0


def _job(seq: int, submitted: float, priority: Priority, est: float | None) -> Job:
    spec = JobSpec("nb.ipynb", priority=priority, est_runtime=est)
    return Job(id=f"j{seq}", spec=spec, submitted_at=submitted, seq=seq)


jobs_st = st.lists(
    st.tuples(
        st.floats(0, 30_000, allow_nan=False),
        st.sampled_from(list(Priority)),
        st.one_of(st.none(), st.floats(0, 3 * A, allow_nan=False)),
    ),
    min_size=2,
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(jobs=jobs_st)
def test_no_job_is_ordered_behind_one_submitted_past_its_starvation_bound(jobs):
    key = aged_key(A, short_first=True)
    js = [_job(i, t, p, e) for i, (t, p, e) in enumerate(jobs)]
    for a in js:
        for b in js:
            if key(b) < key(a):  # b goes first
                assert b.submitted_at < a.submitted_at + starvation_bound(a.spec.priority, A) + 1e-6


def test_within_a_class_the_expected_shorter_job_goes_first():
    key = aged_key(A, short_first=True)
    long_ = _job(0, 0.0, Priority.NORMAL, 50 * 60)
    short = _job(1, 600.0, Priority.NORMAL, 5 * 60)  # 10 min later, 45 min shorter
    unknown = _job(2, 1.0, Priority.NORMAL, None)
    assert key(short) < key(long_) < key(unknown)
    # without short_first: plain aging, arrival order within the class
    plain = aged_key(A)
    assert plain(long_) < plain(unknown) < plain(short)


def test_head_start_is_what_is_left_of_one_interval_and_none_for_long_or_unknown_runs():
    assert short_head_start(_job(0, 0, Priority.LOW, 600.0), A) == A - 600.0
    assert short_head_start(_job(0, 0, Priority.LOW, A), A) == 0.0
    assert short_head_start(_job(0, 0, Priority.LOW, None), A) == 0.0
    # the top class gets none: it is already ordered at its submit time less the whole bound
    key = aged_key(A, short_first=True)
    assert key(_job(0, 1000.0, Priority.HIGH, 60.0))[0] == 1000.0 - 2 * A


def test_a_short_queued_job_starts_before_an_older_long_one_in_the_scheduler():
    s = Scheduler(Cluster([NodeSpec("n", 1)]), [Tenant("t", 1)], "dynamic", SchedulerConfig(short_first=True))
    s.submit(JobSpec("busy", tenant="t", est_runtime=100.0), 0.0)
    s.schedule(0.0)
    s.started("job-0", 0.0)
    long_ = s.submit(JobSpec("long", tenant="t", est_runtime=3000.0), 10.0)
    short = s.submit(JobSpec("short", tenant="t", est_runtime=60.0), 20.0)
    s.finished("job-0", 100.0, ok=True)
    s.schedule(100.0)
    assert short.admitted_at == 100.0 and long_.admitted_at is None


def test_scenario_short_first_must_be_a_boolean():
    import yaml

    # the scheduler section is read after the trace: this needs ../shared/traces, as CI has
    path = find_scenario("seed-3x8")
    raw = yaml.safe_load(path.read_text())
    raw["scheduler"]["short_first"] = "yes"
    with pytest.raises(ScenarioError, match="short_first"):
        scenario_from_dict(raw, where=str(path), base=path.parent, traces=traces_dir(path.parent, None), path=path)
