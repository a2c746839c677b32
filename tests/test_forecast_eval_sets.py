"""The series `benchmarks/forecast_eval.py` builds for its held-out sets are what they say:
arrivals count every job once, in its own 10-minute bucket; offered demand holds each job's
GPUs for its duration (so its integral is the trace's GPU-time)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import TRACES

pytestmark = pytest.mark.timeout(120)

PHILLY = TRACES / "microsoft_philly_2017" / "philly_jobs_pollux.csv.gz"
needs_traces = pytest.mark.skipif(
    not PHILLY.is_file(), reason=f"real traces not found: {PHILLY} (the shared traces folder beside the project)"
)


@pytest.fixture(scope="module")
def fe():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "forecast_eval.py"
    spec = importlib.util.spec_from_file_location("forecast_eval_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_running_holds_each_interval_for_its_minutes(fe):
    # 2 GPUs over [0, 600) s, 1 GPU over [300, 1200) s: minutes 0-4 hold 2, 5-9 hold 3, 10-19 hold 1
    s = fe._running(np.array([0.0, 300.0]), np.array([600.0, 1200.0]), np.array([2.0, 1.0]))
    assert s.start == 0.0 and s.step_s == 600.0
    assert s.values[0] == pytest.approx(2.5) and s.latest[0] == 3.0
    assert s.values[1] == pytest.approx(1.0) and s.latest[1] == 1.0
    assert np.all(s.values[2:] == 0.0)


def test_counts_put_each_arrival_in_its_bucket_and_fill_empty_ones(fe):
    s = fe._counts(pd.Series(["2020-05-01 00:01:00", "2020-05-01 00:09:59", "2020-05-01 00:31:00"]))
    assert s.step_s == 600.0 and list(s.values) == [2.0, 0.0, 0.0, 1.0]
    assert s.start == (pd.Timestamp("2020-05-01") - pd.Timestamp(0)).total_seconds()


@needs_traces
def test_arrival_series_count_every_job_once(fe):
    jobs = pd.read_csv(PHILLY, usecols=["cluster"])
    series = dict(fe.arrival_series(TRACES))
    assert series["philly-all"].values.sum() == len(jobs)
    sizes = jobs["cluster"].value_counts()
    vcs = sorted(sizes[sizes >= fe.PHILLY_MIN_JOBS].index)
    assert [n for n in series if n.startswith("philly-") and n != "philly-all"] == [f"philly-{vc}" for vc in vcs]
    for vc in vcs:
        assert series[f"philly-{vc}"].values.sum() == sizes[vc]
    assert series["genai-lora-requests"].values.sum() == 26823


@needs_traces
def test_offered_demand_holds_the_traces_gpu_time(fe):
    jobs = pd.read_csv(PHILLY, usecols=["duration", "num_gpus"])
    gpu_s = float((jobs["duration"] * jobs["num_gpus"]).sum())
    demand = dict(fe.demand_series(TRACES))["philly-demand-all"]
    held_s = float(np.nansum(demand.values)) * 600.0  # 10-minute means of per-minute levels
    # starts and ends are rounded to whole minutes, and the last bucket may be partly empty
    assert held_s == pytest.approx(gpu_s, rel=0.01)


@needs_traces
def test_count_series_are_jobs_per_vc_and_gpu_pods_created(fe):
    series = dict(fe.count_series(TRACES))
    assert len(series) == 17 and "vc3sl-jobs" in series and "alibaba-pod-arrivals" in series
    pods = pd.read_csv(TRACES / "alibaba_gpu_v2023" / "openb_pod_list_default.csv.gz", usecols=["num_gpu"])
    assert series["alibaba-pod-arrivals"].values.sum() == int((pods["num_gpu"] > 0).sum())
    jobs = series["vc3sl-jobs"]
    assert jobs.step_s == 600.0 and jobs.latest is not None and len(jobs) == 31 * 144  # May 2020, 10-minute means
    raw = pd.read_csv(TRACES / "sensetime_helios_2020" / "earth_vcs" / "vc3sl_cluster_sequence_vc.csv.gz", nrows=10)
    assert (
        jobs.values[0] == pytest.approx(raw["total_job_num"].mean()) and jobs.latest[0] == raw["total_job_num"].iloc[-1]
    )
