"""The demand forecaster (core/forecast.py) on real series, its backtests, the
forecast-eval CLI, and the elastic scaling policy (core/scaling.py).

Real series: the Helios Earth VC per-minute GPU counts in ../shared/traces; the tests that
need them skip (saying so) when that folder is absent."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pandas as pd
import pytest

from jupyter_gpusched.cli import main as cli_main
from jupyter_gpusched.cli.forecast_eval import forecast_eval_main, helios_series
from jupyter_gpusched.core import forecast as F
from jupyter_gpusched.core.model import NodeSpec, Priority
from jupyter_gpusched.core.policies import make_policy
from jupyter_gpusched.core.scaling import (
    DemandFeed,
    ElasticPolicy,
    ElasticScaler,
    PoolSizing,
    ScalingConfig,
    advise,
    plan,
    preemptible_share,
    target_gpus,
)

from conftest import TRACES

pytestmark = pytest.mark.timeout(120)

EARTH = TRACES / "sensetime_helios_2020" / "earth_vcs"
needs_traces = pytest.mark.skipif(
    not EARTH.is_dir(), reason=f"real series not found: {EARTH} (the shared traces folder beside the project)"
)


@pytest.fixture(scope="module")
def vc6ye() -> F.Series:
    return helios_series(EARTH / "vc6YE_cluster_sequence_vc.csv.gz")


def week(series: F.Series, days: float = 8) -> F.Series:
    n = int(days * 144)
    return F.Series(series.start, series.step_s, series.values[:n])


# --- series and error measures ---------------------------------------------------------------------
def test_regularize_buckets_means_and_marks_gaps():
    s = F.regularize([0, 60, 120, 1800, 1860], [1, 2, 3, 10, 20], 600)
    assert s.start == 0 and s.step_s == 600 and len(s) == 4
    assert s.values[0] == 2 and np.isnan(s.values[1]) and np.isnan(s.values[2]) and s.values[3] == 15
    assert s.observed == 2 and s.span_s == 4 * 600


def test_error_measures():
    a = np.array([1.0, 2.0, 3.0, np.nan])
    assert F.smape(a, a) == 0.0
    assert F.smape(np.zeros(3), np.zeros(3)) == 0.0  # 0/0 counts as a perfect step
    assert F.smape(np.array([1.0]), np.array([3.0])) == pytest.approx(100.0)
    train = np.array([0.0, 2.0, 0.0, 2.0])  # lag-1 naive MAE = 2
    assert F.mase(np.array([1.0, 1.0]), np.array([2.0, 0.0]), train, season=1) == pytest.approx(0.5)
    assert math.isnan(F.mase(np.array([1.0]), np.array([1.0]), np.ones(5), season=1))  # flat history: no scale


def test_seasonal_naive_is_perfect_on_a_periodic_series():
    m = 144
    y = np.tile(np.sin(np.linspace(0, 2 * np.pi, m, endpoint=False)) * 10 + 20, 6)
    s = F.Series(0.0, 600.0, y)
    bt = F.backtest(s, 144, ["seasonal-naive", "last-value"], first_origin=3 * m, every=72)
    assert bt.models["seasonal-naive"].mase == pytest.approx(0.0, abs=1e-12)
    assert bt.models["last-value"].mase > 0.5


# --- fallbacks -----------------------------------------------------------------------------------------
def test_fallbacks_say_so():
    fc = F.forecast(F.Series(0.0, 600.0, np.zeros(0)), 6)
    assert fc.model is None and len(fc.values) == 0 and "no demand history" in fc.note
    rng = np.random.default_rng(0)
    # too short to select a model by backtest (6 h to fit plus the horizon): the latest demand, held
    five_hours = F.Series(0.0, 600.0, rng.integers(0, 8, 30).astype(float))
    fc = F.forecast(five_hours, 6)
    assert fc.model == "latest" and "falling back to the latest demand" in fc.note
    assert np.allclose(fc.values, five_hours.values[-1])
    # named models keep their own fallbacks
    half_day = F.Series(0.0, 600.0, rng.integers(0, 8, 72).astype(float))
    fc = F.forecast(half_day, 6, model="prophet-ar")
    assert fc.model == "mean" and "falling back to the mean" in fc.note
    assert np.allclose(fc.values, half_day.values.mean())
    day_and_half = F.Series(0.0, 600.0, rng.integers(0, 8, 216).astype(float))
    fc = F.forecast(day_and_half, 6, model="prophet-ar")
    assert fc.model == "seasonal-naive" and "Prophet needs 2 days" in fc.note
    assert np.array_equal(fc.values, day_and_half.values[216 - 144 : 216 - 138])  # same time yesterday
    # with enough history auto selects, and says which and why
    fc = F.forecast(day_and_half, 6)
    assert fc.model in (*F.CANDIDATES, F.ENSEMBLE) and fc.note.startswith("selected ")
    flat = F.Series(0.0, 600.0, np.full(2000, 3.0))
    fc = F.forecast(flat, 6)
    assert fc.model == "mean" and "constant" in fc.note and np.allclose(fc.values, 3.0)


def test_missing_prophet_falls_back_to_seasonal_naive(monkeypatch):
    monkeypatch.setitem(sys.modules, "prophet", None)  # import prophet -> ImportError
    y = np.tile(np.arange(144, dtype=float), 3)
    fc = F.forecast(F.Series(0.0, 600.0, y), 12, model="prophet-ar")
    assert fc.model == "seasonal-naive" and "Prophet is not installed" in fc.note
    # auto leaves Prophet out of the selection, and says so (it is a candidate on 3 weeks)
    y = np.tile(np.arange(144, dtype=float), 21)
    fc = F.forecast(F.Series(0.0, 600.0, y), 12)
    assert "prophet-ar left out: Prophet is not installed" in fc.note
    # what is served follows the daily saw exactly (seasonal-naive, or `revert` with its daily shape)
    assert fc.model in ("seasonal-naive", "revert") and np.allclose(fc.values, np.arange(12))


# --- Prophet on real series -------------------------------------------------------------------------
@needs_traces
def test_forecast_on_a_real_series_has_a_band_around_it(vc6ye):
    s = week(vc6ye)
    fc = F.forecast(s, 144, model="prophet-ar")
    assert fc.model == "prophet-ar" and "Prophet with daily" in fc.note and "backtest MASE" in fc.note
    assert len(fc.times) == len(fc.values) == len(fc.lower) == len(fc.upper) == 144
    assert fc.times[0] == s.time_of(len(s)) and np.all(np.diff(fc.times) == 600)
    assert np.all(fc.lower <= fc.values) and np.all(fc.values <= fc.upper)
    assert np.all(fc.lower >= 0) and np.all(np.isfinite(fc.upper))
    assert np.any(fc.upper > fc.lower)
    # anchored: the first step starts near the last observation, not at Prophet's curve
    assert abs(fc.values[0] - s.values[-1]) < 0.1 * s.values[-1] + 5
    assert fc.fit_s < 5.0  # a week of demand fits in well under the few seconds allowed (10-min means)
    plain = F.forecast(s, 144, model="prophet")
    assert plain.model == "prophet" and not np.allclose(plain.values, fc.values)


@needs_traces
def test_forecast_is_deterministic(vc6ye):
    s = week(vc6ye, 5)
    a, b = F.forecast(s, 36), F.forecast(s, 36)
    assert np.array_equal(a.values, b.values) and np.array_equal(a.upper, b.upper)


@needs_traces
def test_backtest_numbers_are_reproducible_and_complete(vc6ye):
    s = F.Series(vc6ye.start, vc6ye.step_s, vc6ye.values[: 10 * 144])
    kw = dict(origins=[8 * 144, 9 * 144], train=7 * 144)
    a = F.backtest(s, 6, **kw).to_dict()
    b = F.backtest(s, 6, **kw).to_dict()
    for d in (a, b):
        for m in d["models"].values():
            m.pop("fit_s")  # wall time, the one thing allowed to differ
    assert a == b
    assert set(a["models"]) == {"prophet-ar", "prophet", "seasonal-naive", "last-value"}
    for m in a["models"].values():
        assert m["mase"] is not None and m["mase"] >= 0 and 0 <= m["smape"] <= 200 and 0 <= m["coverage"] <= 1
        assert m["origins"] == 2 and m["fits"] == 2
    # an hour ahead, anchoring on the latest demand beats Prophet's seasonal curve alone
    assert a["models"]["prophet-ar"]["mase"] < a["models"]["prophet"]["mase"]


@needs_traces
def test_report_says_which_model_and_why_against_baselines(vc6ye):
    rep = F.forecast_report(week(vc6ye), 6)
    sel = rep["skill"]["selection"]
    assert rep["model"] == sel["model"] and rep["model"] in (*F.CANDIDATES, F.ENSEMBLE)
    names = list(rep["skill"]["models"])
    assert names[:3] == [rep["model"], "seasonal-naive", "last-value"] or rep["model"] in F.BASELINES
    # every candidate's backtest MASE, the baselines among them (Prophet joins on two weeks)
    assert set(F.CANDIDATES) - {"prophet-ar"} <= set(names) and "prophet-ar" not in names
    assert rep["skill"]["origins"] == sel["origins"] == 6 * 24  # hourly over the last 6 days
    assert set(sel["baselines"]) == set(F.BASELINES) and all(v is not None for v in sel["baselines"].values())
    served = sel["mase"][rep["model"]]
    assert served <= min(v for v in sel["mase"].values() if v is not None) / (1 - 0.05) + 1e-9
    assert rep["note"].startswith("selected ") and "backtest MASE" in rep["note"]
    json.dumps(rep, allow_nan=False)  # plain JSON, no NaN
    assert "MASE" in F.skill_summary(rep["skill"])
    short = F.forecast_report(week(vc6ye, 0.2), 6)  # under 6 h + 1 h: no selection, no skill
    assert short["skill"] is None and short["model"] == "latest" and "too short to backtest" in short["note"]


def test_band_scale_is_the_conformal_quantile():
    assert F.band_scale([0.5, 1.0], 0.8) == 1.0  # too few misses to learn from: unchanged
    scores = np.arange(1, 11, dtype=float)  # 1..10 band widths out
    # 80% with the finite-sample correction: the ceil(11 * 0.8) = 9th of 10 smallest
    assert F.band_scale(scores, 0.8) == pytest.approx(np.quantile(scores, 0.9))
    assert F.band_scale([*scores, math.inf, math.nan], 0.8) == pytest.approx(np.quantile(scores, 0.9))


@needs_traces
def test_calibrated_bands_cover_nearer_what_they_aim_for(vc6ye):
    """In-sample bands are too narrow out of sample; online conformal calibration (each origin
    scaled by the misses already seen) brings coverage near the aimed 80%."""
    s = F.Series(vc6ye.start, vc6ye.step_s, vc6ye.values[: 21 * 144])
    bt = F.backtest(
        s, 6, ["prophet-ar", "seasonal-naive"], first_origin=14 * 144, every=6, train=14 * 144, refit_every=144
    )
    for name, m in bt.models.items():
        assert m.origins > 150
        assert abs(m.coverage - 0.8) < abs(m.raw_coverage - 0.8), (name, m)
        assert abs(m.coverage - 0.8) < 0.1, (name, m)
    off = F.backtest(s, 6, ["seasonal-naive"], first_origin=14 * 144, every=6, train=14 * 144, calibrate=False)
    m = off.models["seasonal-naive"]
    assert m.coverage == m.raw_coverage and m.band_scale == 1.0


@needs_traces
def test_the_reported_band_is_the_selected_models_backtest_errors(vc6ye):
    """The band belongs to whichever model is served: per lead time, the 10% and 90% quantiles
    of that model's own errors in the selection backtest (split conformal)."""
    s = week(vc6ye)
    fitted, note = F.fit_model(s, "auto", 6)
    assert isinstance(fitted, F.SelectedModel)
    p, lower, upper = fitted.predict(s.values, 6)
    e = fitted.selection.errors
    assert e.shape == (fitted.selection.origins, 6)
    q = np.nanquantile(e, [0.1, 0.9], axis=0)
    widths = np.maximum.accumulate(np.maximum(q[1], 0)) - np.minimum.accumulate(np.minimum(q[0], 0))
    assert np.allclose(upper - lower, widths) or np.any(lower == 0)  # (clipped at 0 GPUs)
    # on the backtest's own origins, the band holds about 80% (it is their quantiles)
    inside = (e >= np.minimum.accumulate(np.minimum(q[0], 0))) & (e <= np.maximum.accumulate(np.maximum(q[1], 0)))
    assert 0.78 <= inside.mean() <= 0.95
    rep = F.forecast_report(s, 6)
    assert rep["upper"] == pytest.approx(np.round(upper, 3).tolist()) and rep["model"] == fitted.model


# --- forecast-eval CLI -----------------------------------------------------------------------------------
@pytest.fixture
def vc_csv(tmp_path):
    if not EARTH.is_dir():
        pytest.skip(f"real series not found: {EARTH}")
    df = pd.read_csv(
        EARTH / "vchbv_cluster_sequence_vc.csv.gz",
        usecols=["time", "running_gpu_num", "pending_gpu_num"],
        nrows=9 * 1440,
    )
    df["gpus"] = df["running_gpu_num"] + df["pending_gpu_num"]
    path = tmp_path / "vchbv.csv"
    df[["time", "gpus"]].to_csv(path, index=False)
    return path


def test_forecast_eval_cli_on_a_real_series(vc_csv, tmp_path, capsys):
    out = tmp_path / "skill.json"
    code = cli_main(
        [
            "forecast-eval",
            "--series",
            str(vc_csv),
            "--time-col",
            "time",
            "--value-col",
            "gpus",
            "--horizon",
            "60",
            "--origins",
            "3",
            "--json",
            str(out),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "horizon 60 x 1 min = 1 h (6 steps of 10 min)" in text
    assert "3 origins spread from 4.5 days in" in text  # 9 days: the first origin at half the series
    names = ("auto", *F.CANDIDATES, "ensemble")
    for name in names:
        assert name in text
    assert "auto served:" in text
    doc = json.loads(out.read_text())
    assert set(doc["models"]) == set(names)
    for m in doc["models"].values():
        assert {"mase", "mase_median", "mase_worst", "smape", "fit_s"} <= set(m) and m["mase"] is not None
        assert m["mase_median"] <= m["mase_worst"]
    assert doc["origins"] == 3 and doc["horizon_steps"] == 6 and sum(doc["served"].values()) == 3


def test_forecast_eval_cli_refuses_bad_input_clearly(vc_csv, tmp_path, capsys):
    base = ["--series", str(vc_csv), "--time-col", "time", "--horizon", "6"]
    assert forecast_eval_main([*base, "--value-col", "nope"]) == 2
    assert "no column 'nope' (given as --value-col)" in capsys.readouterr().err
    assert forecast_eval_main([*base, "--value-col", "gpus", "--models", "magic"]) == 2
    assert "unknown model(s) magic" in capsys.readouterr().err
    assert (
        forecast_eval_main(
            ["--series", str(tmp_path / "none.csv"), "--time-col", "t", "--value-col", "v", "--horizon", "1"]
        )
        == 2
    )
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("time,gpus\n2020-05-01 00:00:00,3\nyesterday,4\n")
    assert (
        forecast_eval_main(["--series", str(bad), "--time-col", "time", "--value-col", "gpus", "--horizon", "1"]) == 2
    )
    assert "line 3, column 'time': not a date-time" in capsys.readouterr().err


# --- elastic scaling ---------------------------------------------------------------------------------------
POOLS = [
    PoolSizing("ondemand", 8, min_nodes=1, max_nodes=10),
    PoolSizing("spot", 8, min_nodes=0, max_nodes=4, spot=True),
]


def test_target_looks_ahead_over_the_lead_time():
    times = np.arange(0, 6000, 600.0)
    upper = np.array([10, 10, 10, 50, 10, 10, 10, 10, 10, 10.0])  # a peak at t = 1800
    assert target_gpus(0, times, upper, lead_s=600) == 10
    assert target_gpus(0, times, upper, lead_s=1800) == 50  # capacity is asked for before the peak
    assert target_gpus(2400, times, upper, lead_s=1800) == 10  # after the peak it is not
    assert target_gpus(0, [], [], 1800) == 0


def test_plan_respects_bounds_split_and_cooldown():
    cfg = ScalingConfig(lead_s=1800, cooldown_s=3600, spot_share=0.5)
    d = {x.pool: x.nodes for x in plan(0, 64, POOLS, {"ondemand": 1, "spot": 0}, cfg)}
    assert d == {"ondemand": 4, "spot": 4}  # 32 GPUs each
    d = {x.pool: x.nodes for x in plan(0, 200, POOLS, {"ondemand": 1, "spot": 0}, cfg)}
    assert d == {"ondemand": 10, "spot": 4}  # spot full at 4 nodes: the rest on demand, capped at 10
    assert plan(0, 0, POOLS, {"ondemand": 1, "spot": 0}, cfg) == []  # min_nodes kept
    # shrinking waits for the cool-down after the last change; growing never waits
    assert plan(1000, 8, POOLS, {"ondemand": 4, "spot": 4}, cfg, {"ondemand": 0, "spot": 0}) == []
    shrink = {
        x.pool: x.nodes for x in plan(4000, 8, POOLS, {"ondemand": 4, "spot": 4}, cfg, {"ondemand": 0, "spot": 0})
    }
    assert shrink == {"ondemand": 1, "spot": 1}
    grow = plan(1000, 128, POOLS, {"ondemand": 4, "spot": 4}, cfg, {"ondemand": 900, "spot": 900})
    assert {x.pool: x.nodes for x in grow} == {"ondemand": 10}
    with pytest.raises(ValueError):
        ScalingConfig(spot_share=1.5)


def test_a_learnt_spot_share_is_the_preemptible_part_of_last_weeks_requests():
    """spot_share "auto" (None): the preemptible jobs' share of the GPU-seconds asked for over the
    last week -- each job from its submission to its end, or now -- sizes spot pools, the rest
    (the work that may not run on spot) on-demand ones. A real scheduler's jobs, queued,
    running and finished."""
    from jupyter_gpusched.core.model import JobSpec
    from jupyter_gpusched.core.placement import Cluster, Pool
    from jupyter_gpusched.core.scheduler import Scheduler

    week = 7 * 86400.0
    s = Scheduler(
        Cluster([NodeSpec("od-0", 8, "ondemand"), NodeSpec("sp-0", 8, "spot")], [Pool("ondemand"), Pool("spot", True)])
    )
    now = 10 * 86400.0
    old = s.submit(JobSpec("n.ipynb", gpus=8, preemptible=True), 0.0)  # asked before the week, ended then: not counted
    old.finished_at = 3600.0
    done = s.submit(JobSpec("n.ipynb", gpus=2, preemptible=False), now - 2 * 86400)  # 2 GPUs for a day
    done.finished_at = now - 86400
    s.submit(JobSpec("n.ipynb", gpus=1, preemptible=True), now - 8 * 86400)  # 1 GPU, still asking: 7 days of it count
    s.submit(JobSpec("n.ipynb", gpus=4, preemptible=True), now - 3600)  # 4 GPUs for the last hour
    # waiting for its dependency: not asking yet (the demand leaves it out too)
    s.submit(JobSpec("n.ipynb", gpus=8, preemptible=False, after=(done.id,)), now - 86400)
    pre, non = 1 * week + 4 * 3600, 2 * 86400
    share, counted = preemptible_share(s.jobs.values(), now)
    assert counted == 3 and share == pytest.approx(pre / (pre + non))
    assert preemptible_share([], now) == (0.0, 0)

    pools = [PoolSizing("ondemand", 8, 0, 10), PoolSizing("spot", 8, 0, 10, spot=True)]
    learnt = ElasticScaler(pools, ScalingConfig(lead_s=1800, cooldown_s=3600, spot_share=None))
    a = advise(s, learnt, now, [now, now + 600], [80.0, 80.0])
    assert a.spot_share == pytest.approx(share) and "3 jobs" in a.spot_share_source
    sizes = {p.name: p.recommended_nodes for p in a.pools}
    assert sizes == {"ondemand": math.ceil(80 * (1 - share) / 8), "spot": math.ceil(80 * share / 8)}
    # counted again when a job arrives (else once per 10-minute bucket)
    s.submit(JobSpec("n.ipynb", gpus=8, preemptible=False), now - 86400)
    again = advise(s, learnt, now + 1, [now, now + 600], [80.0, 80.0])
    assert again.spot_share < share and "4 jobs" in again.spot_share_source
    # configured: as before, and says so
    fixed = advise(s, ElasticScaler(pools, ScalingConfig(spot_share=0.5)), now, [now, now + 600], [80.0, 80.0])
    assert fixed.spot_share == 0.5 and fixed.spot_share_source == "configured"
    assert {p.name: p.recommended_nodes for p in fixed.pools} == {"ondemand": 5, "spot": 5}
    # nothing learnt yet: all on demand
    empty = Scheduler(Cluster([NodeSpec("od-0", 8, "ondemand")], [Pool("ondemand"), Pool("spot", True)]))
    none = advise(empty, ElasticScaler(pools, ScalingConfig(spot_share=None)), now, [now, now + 600], [16.0, 16.0])
    assert none.spot_share == 0.0 and "no job asked for GPUs in the last 7 days" in none.spot_share_source
    assert {p.name: p.recommended_nodes for p in none.pools} == {"ondemand": 2, "spot": 0}


def test_scaler_remembers_what_it_asked():
    sc = ElasticScaler([PoolSizing("od", 4, 0, 8)], ScalingConfig(lead_s=600, cooldown_s=1000))
    times = np.arange(0, 7200, 600.0)
    first = sc.decide(0, times, np.full(12, 10.0), {"od": 0})
    assert [(d.pool, d.nodes) for d in first] == [("od", 3)]
    assert sc.decide(60, times, np.full(12, 10.0), {"od": 0}) == []  # nodes on their way: nothing new
    assert sc.decide(120, times, np.full(12, 1.0), {"od": 3}) == []  # cool-down
    assert [(d.pool, d.nodes) for d in sc.decide(1200, times, np.full(12, 1.0), {"od": 3})] == [("od", 1)]


class StubFeed:
    """A forecast that knows a burst of 24 GPUs comes at t = 7200."""

    def observe(self, t, gpus):
        pass

    def upper(self, now):
        times = np.arange(0, 20000, 600.0)
        return times, np.where((times >= 7200) & (times < 9000), 24.0, 0.0)


def test_elastic_policy_in_the_simulator_brings_capacity_before_the_burst():
    from jupyter_gpusched.sim.engine import PoolConfig, SimJob, Simulation
    from jupyter_gpusched.sim.traces import TraceJob

    jobs = [SimJob(TraceJob("warm", 0, 600, 1), Priority.NORMAL, False)]
    jobs += [SimJob(TraceJob(f"b{i}", 7200, 1800, 8), Priority.NORMAL, False) for i in range(3)]
    pools = [
        PoolConfig(
            "od",
            (NodeSpec("od-0", 8, "od"),),
            price_per_gpu_hour=3.0,
            provision_s=300,
            gpus_per_node=8,
            min_nodes=1,
            max_nodes=4,
        )
    ]
    scaler = ElasticScaler([PoolSizing("od", 8, 1, 4)], ScalingConfig(lead_s=1800, cooldown_s=600))
    policy = ElasticPolicy(make_policy("dynamic"), scaler, StubFeed())
    res = Simulation(jobs, pools, (), policy).run()
    waits = {r.id: r.wait for r in res.jobs}
    assert all(waits[f"b{i}"] == 0 for i in range(3)), waits  # 3 nodes were up when the burst arrived
    ups = [(t, d.nodes) for t, d in policy.decisions if d.nodes > 1]
    assert ups and ups[0][0] <= 7200 - 300  # asked at least the start-up time ahead
    downs = [t for t, d in policy.decisions if d.nodes == 1]
    assert downs and downs[-1] >= 9000  # and given back after the burst
    assert res.capacity_max == 24


@needs_traces
def test_demand_feed_forecasts_from_observed_demand(vc6ye):
    feed = DemandFeed(model="auto", horizon_s=3600, refit_s=6 * 3600)
    s = week(vc6ye, 3)
    for t, v in zip(s.times, s.values, strict=True):
        feed.observe(t + 300, v)
    now = s.times[-1] + 300
    times, upper = feed.upper(now)
    assert len(times) == 6 and times[0] == s.times[-1] + 600 and np.all(upper >= 0)
    assert sum(feed.models_used.values()) == 1 and set(feed.models_used) <= {*F.CANDIDATES, F.ENSEMBLE}
    times2, upper2 = feed.upper(now + 600)  # within refit_s: the cached fit
    assert feed.fits == 1 and np.array_equal(times2, times)


def test_elastic_policy_hands_every_policy_hook_to_the_policy_it_wraps():
    """A hook the wrapper does not pass on silently becomes the base class's default: the
    queue lost `dynamic`'s grouping this way (same decisions, a slower pass)."""
    import inspect

    from jupyter_gpusched.core.policies.base import Policy

    inner = make_policy("spot-hybrid")
    wrapped = ElasticPolicy(inner, ElasticScaler([]))
    hooks = [n for n, f in inspect.getmembers(Policy, inspect.isfunction) if not n.startswith("_")]
    for name in hooks:
        assert name in vars(ElasticPolicy), f"ElasticPolicy does not hand {name} on"
    assert inner.queue_group() is not None and wrapped.queue_group() == inner.queue_group()
