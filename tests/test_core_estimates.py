"""Learned runtime estimates (core/estimates.py) and how JobSpec.runtime_estimate uses them."""

from __future__ import annotations

import dataclasses

import pytest

from jupyter_gpusched.core.estimates import BASES, RuntimeHistory, observed_runtime, quantile
from jupyter_gpusched.core.model import Job, JobSpec, JobState


def spec(notebook="train.ipynb", gpus=1, owner="ann", tenant="vision", **kw) -> JobSpec:
    return JobSpec(notebook=notebook, gpus=gpus, owner=owner, tenant=tenant, **kw)


def test_one_run_is_not_enough_two_are():
    h = RuntimeHistory()
    h.observe(spec(), 600.0)
    assert h.estimate(spec()) is None
    h.observe(spec(), 900.0)
    e = h.estimate(spec())
    assert e is not None
    assert (e.seconds, e.basis, e.samples) == (900.0, "owner+notebook+gpus", 2)


def test_the_estimate_is_the_80th_percentile_nearest_rank():
    h = RuntimeHistory()
    for s in (10, 20, 30, 40, 50, 60, 70, 80, 90, 100):
        h.observe(spec(), float(s))
    e = h.estimate(spec())
    assert e is not None and e.seconds == 80.0 and e.samples == 10
    assert quantile([5.0], 0.8) == 5.0
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.8) == 4.0


def test_falls_back_from_most_to_least_specific_key():
    h = RuntimeHistory()
    h.observe(spec(gpus=1), 100.0)
    h.observe(spec(gpus=1), 100.0)
    # same notebook on 2 GPUs: no runs of its own yet -> the notebook's runs on any GPU count
    e = h.estimate(spec(gpus=2))
    assert e is not None and e.basis == "owner+notebook" and e.samples == 2
    # another notebook of the same tenant on 1 GPU -> tenant + gpus
    e = h.estimate(spec(notebook="other.ipynb", owner="bob"))
    assert e is not None and e.basis == "tenant+gpus"
    # on 4 GPUs -> the tenant's runs of any size
    e = h.estimate(spec(notebook="other.ipynb", owner="bob", gpus=4))
    assert e is not None and e.basis == "tenant"
    # another tenant: nothing
    assert h.estimate(spec(notebook="other.ipynb", owner="bob", tenant="nlp")) is None
    assert [e.basis for e in (h.estimate(spec()),) if e] == [BASES[0]]


def test_a_more_specific_key_wins_once_it_has_enough_runs():
    h = RuntimeHistory()
    for _ in range(5):
        h.observe(spec(notebook="long.ipynb"), 5000.0)
    h.observe(spec(notebook="short.ipynb"), 60.0)
    e = h.estimate(spec(notebook="short.ipynb"))
    assert e is not None and e.basis == "tenant+gpus" and e.seconds == 5000.0
    h.observe(spec(notebook="short.ipynb"), 60.0)
    e = h.estimate(spec(notebook="short.ipynb"))
    assert e is not None and e.basis == "owner+notebook+gpus" and e.seconds == 60.0


def test_keeps_only_the_last_runs_per_key():
    h = RuntimeHistory(per_key=3)
    for s in (1000.0, 1000.0, 1000.0, 10.0, 10.0, 10.0):
        h.observe(spec(), s)
    e = h.estimate(spec())
    assert e is not None and e.seconds == 10.0 and e.samples == 3
    assert h.runs(history_key := next(k for k, _ in h.items())) == [10.0, 10.0, 10.0], history_key


def test_evicts_the_key_updated_longest_ago():
    h = RuntimeHistory(max_keys=8)  # two jobs' worth of four keys
    for nb in ("a", "b"):
        h.observe(spec(notebook=nb, tenant=nb), 10.0)
        h.observe(spec(notebook=nb, tenant=nb), 10.0)
    h.observe(spec(notebook="a", tenant="a"), 10.0)  # "a" is now the newest
    h.observe(spec(notebook="c", tenant="c"), 10.0)  # four new keys: b's go
    assert len(h) == 8
    assert h.estimate(spec(notebook="b", tenant="b")) is None
    assert h.estimate(spec(notebook="a", tenant="a")) is not None


def test_bad_run_times_are_ignored():
    h = RuntimeHistory()
    assert h.observe(spec(), 0.0) == []
    assert h.observe(spec(), float("nan")) == []
    assert h.observe(spec(), float("inf")) == []
    assert len(h) == 0
    with pytest.raises(ValueError):
        RuntimeHistory(q=0.0)


def test_load_restores_what_items_gave():
    h = RuntimeHistory()
    for s in (30.0, 40.0, 50.0):
        h.observe(spec(), s)
    h2 = RuntimeHistory()
    h2.load(h.items())
    assert h2.estimate(spec()) == h.estimate(spec())
    assert list(h2.items()) == list(h.items())
    small = RuntimeHistory(per_key=2)
    small.load(h.items())
    assert all(len(runs) == 2 for _, runs in small.items())


def finished(state=JobState.SUCCEEDED, gpus=2, attained=1200.0, interactive=False) -> Job:
    job = Job("j", spec(gpus=gpus, interactive=interactive), submitted_at=0.0, seq=1)
    job.state = state
    job.attained_gpu_s = attained
    job.started_at, job.finished_at = 100.0, 700.0
    return job


def test_observed_runtime_is_gpu_service_per_gpu_of_succeeded_runs_only():
    assert observed_runtime(finished()) == 600.0
    assert observed_runtime(finished(state=JobState.FAILED)) is None
    assert observed_runtime(finished(state=JobState.CANCELLED)) is None
    assert observed_runtime(finished(interactive=True)) is None
    assert observed_runtime(finished(attained=0.0)) == 600.0  # no service recorded: its last attempt
    h = RuntimeHistory()
    assert h.observe_job(finished(state=JobState.FAILED)) == []
    assert len(h.observe_job(finished())) == 4


def test_runtime_estimate_order_est_then_learned_capped_then_max():
    assert spec().runtime_estimate is None
    assert spec(max_runtime=600.0).runtime_estimate == 600.0
    assert spec(learned_runtime=300.0).runtime_estimate == 300.0
    assert spec(learned_runtime=300.0, max_runtime=600.0).runtime_estimate == 300.0
    assert spec(learned_runtime=900.0, max_runtime=600.0).runtime_estimate == 600.0  # stopped at max_runtime
    assert spec(learned_runtime=900.0, est_runtime=50.0).runtime_estimate == 50.0
    assert dataclasses.replace(spec(), learned_runtime=42.0).runtime_estimate == 42.0
