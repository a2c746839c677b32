"""The model set and the selection by backtest (core/forecast/statistical.py, selection.py):
the latest sample, ETS and Theta against statsmodels' own forecasts, origins spread over the
series, selection with no look-ahead that picks what the history rewards, the ensemble, and
the evaluation the benchmarks print."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from jupyter_gpusched.core import forecast as F
from jupyter_gpusched.core.forecast.statistical import EtsModel, ThetaModel

pytestmark = pytest.mark.timeout(120)
STEP = 600.0


def periodic(days: int, noise: float = 0.3, seed: int = 0) -> F.Series:
    """Demand with a strong daily shape (10 GPUs by day, 2 by night) and a little noise."""
    rng = np.random.default_rng(seed)
    day = np.where((np.arange(144) >= 48) & (np.arange(144) < 108), 10.0, 2.0)
    return F.Series(0.0, STEP, np.tile(day, days) + rng.normal(0, noise, 144 * days))


def steps(days: int, seed: int = 0) -> F.Series:
    """Level shifts at random times (jobs of hours to days), no daily shape."""
    rng = np.random.default_rng(seed)
    jumps = np.where(rng.random(144 * days) < 0.02, rng.normal(0, 8, 144 * days), 0.0)
    return F.Series(0.0, STEP, np.maximum(40 + np.cumsum(jumps), 0.0))


def test_spread_origins_cover_the_whole_series_evenly():
    o = F.spread_origins(10_000, 6, 1008, 50)
    assert len(o) == 50 and o[0] == 1008 and o[-1] == 10_000 - 6
    gaps = np.diff(o)
    assert gaps.max() - gaps.min() <= 1
    assert F.spread_origins(100, 6, 90, 50) == list(range(90, 95))  # fewer steps than origins
    assert F.spread_origins(100, 6, 99, 50) == []


def test_regularize_keeps_each_buckets_last_sample_whatever_the_order():
    s = F.regularize([660, 0, 60, 1260, 600], [7, 1, 3, 9, 5], 600)
    assert list(s.values[:2]) == [2.0, 6.0] and s.latest is not None
    assert list(s.latest[:2]) == [3.0, 7.0] and s.latest[2] == 9.0
    assert list(s.tail(1200).latest) == [7.0, 9.0] and list(s.head(1).latest) == [3.0]


def test_latest_holds_the_last_sample_not_the_bucket_mean():
    # demand stepped from 0 to 8 GPUs half way through the last bucket: its mean says 4
    s = F.regularize(np.arange(0, 1200, 60.0), [0.0] * 15 + [8.0] * 5, 600)
    assert s.values[-1] == pytest.approx(4.0)
    latest = F.fit("latest", s)
    assert list(latest.point(s.values, 3)) == [8.0, 8.0, 8.0]
    assert list(F.fit("last-value", s).point(s.values, 3)) == [4.0, 4.0, 4.0]
    bare = F.Series(0.0, 600.0, s.values)  # no samples kept: the bucket mean
    assert list(F.fit("latest", bare).point(bare.values, 2)) == [4.0, 4.0]


def test_ets_and_theta_run_statsmodels_own_recursion():
    from statsmodels.tsa.forecasting.theta import ThetaModel as SmTheta
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    s = steps(4, seed=3)
    y = s.values
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = (
            ExponentialSmoothing(y, trend="add", damped_trend=True, initialization_method="estimated")
            .fit()
            .forecast(12)
        )
        theta = SmTheta(y, period=144, deseasonalize=False).fit().forecast(12)
    ets = EtsModel(s, 0, len(y), 144)
    assert np.allclose(ets.point(y, 12), want, rtol=1e-6, atol=1e-6)
    assert np.allclose(ThetaModel(s, 0, len(y), 144).point(y, 12), theta, rtol=1e-3, atol=1e-3)
    # fitted on the first 3 days, run forward over the 4th: the same as filtering the whole series
    early = EtsModel(s, 0, 3 * 144, 144)
    later = early.point(y, 6)
    assert np.allclose(later, early.ahead(*early._run(y, early.initial)[-1], 6))
    assert np.allclose(
        early.point(y[: 3 * 144 + 10], 6), early.ahead(*early._run(y[: 3 * 144 + 10], early.initial)[-1], 6)
    )


def test_selection_reads_nothing_after_its_window():
    s = periodic(6)
    hi = 5 * 144
    garbage = F.Series(s.start, STEP, np.concatenate([s.values[:hi], np.full(144, 1e6)]))
    a = F.select(s, 0, hi, 6, candidates=("latest", "ets", "seasonal-naive", "last-value"))
    b = F.select(garbage, 0, hi, 6, candidates=("latest", "ets", "seasonal-naive", "last-value"))
    assert a is not None and b is not None
    assert a.model == b.model and a.mase == b.mase and np.array_equal(a.errors, b.errors)


def test_selection_rewards_the_daily_shape_and_otherwise_keeps_the_latest():
    cands = ("latest", "ets", "seasonal-naive", "last-value")
    shaped = F.select(periodic(8), 0, 8 * 144, 144, candidates=cands)
    assert shaped is not None and shaped.model == "seasonal-naive", shaped.why
    assert shaped.mase["seasonal-naive"] < 0.95 * shaped.mase["latest"]
    assert "seasonal-naive" in shaped.why and "last-value" in shaped.why
    flat = F.select(steps(8), 0, 8 * 144, 6, candidates=cands)
    assert flat is not None and flat.model == "latest", flat.why  # no challenger 5% better
    # a day ahead on 4 days of history: the shape still wins, at most origins
    short = F.select(periodic(4), 0, 4 * 144, 144, candidates=cands)
    assert short is not None and short.model == "seasonal-naive" and short.origins > 0
    long_flat = F.select(steps(8), 0, 8 * 144, 144, candidates=cands)
    assert long_flat is not None and long_flat.model == "latest", long_flat.why


def test_ensemble_is_the_median_of_the_best_three():
    s = periodic(8)
    fitted, sel = F.selection.fit_selected(s, 0, len(s), 6, force=F.ENSEMBLE)
    assert fitted is not None and sel is not None and sel.model == F.ENSEMBLE and len(sel.members) == 3
    ranked = sorted((v, k) for k, v in sel.mase.items() if k != F.ENSEMBLE and math.isfinite(v))
    assert set(sel.members) == {k for _, k in ranked[:3]}
    each = np.stack([m.point(s.values, 6) for m in fitted.members])
    assert np.allclose(fitted.point(s.values, 6), np.median(each, axis=0))


def test_a_history_with_long_gaps_selects_without_warnings():
    """Origins whose outcome falls in a gap have no error (NaN), not a numpy warning."""
    y = periodic(8).values.copy()
    y[200:700] = np.nan  # the collector was down for three days
    s = F.Series(0.0, STEP, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for horizon in (6, 144):
            f = F.forecast(s, horizon)
            assert f.model is not None and np.isfinite(f.values).all()


def test_evaluate_scores_the_served_forecast_and_the_spread():
    s = periodic(9)
    served: list[str] = []
    bt = F.evaluate(
        s, 144, ("auto", "seasonal-naive", "last-value"), train=8 * 144, first_origin=7 * 144, count=4, served=served
    )
    assert len(bt.origins) == 4 and len(served) == 4
    auto = bt.models["auto"]
    finite = auto.per_origin[np.isfinite(auto.per_origin)]
    assert auto.mase_median == pytest.approx(np.median(finite)) and auto.mase_worst == pytest.approx(finite.max())
    # a strong daily shape: the served forecast does as well as seasonal-naive, far better than last-value
    assert auto.mase <= bt.models["seasonal-naive"].mase * 1.05 < bt.models["last-value"].mase


def test_where_origins_overlap_a_challenger_must_win_a_sign_test_over_independent_blocks():
    from jupyter_gpusched.core.forecast.selection import _beats_default, sign_test_p

    assert sign_test_p(5, 5) == pytest.approx(1 / 32) and sign_test_p(0, 7) == 1.0
    assert sign_test_p(4, 5) == pytest.approx(6 / 32)
    # a day ahead, 120 hourly origins are five days: blocks of 24 origins, five outcomes
    default = np.ones(120)
    lucky = np.where(np.arange(120) < 80, 0.5, 1.05)  # 32% better on average, at 80 of 120 origins
    scores = {"revert": 1.0, "ets": float(lucky.mean())}
    per_origin = {"revert": default, "ets": lucky}
    assert _beats_default("ets", "revert", scores, per_origin, 1)  # origins apart: 2 in 3 is enough
    assert not _beats_default("ets", "revert", scores, per_origin, 24)  # 4 days of 5: p = 0.19
    steady = np.full(120, 0.9)  # 10% better every day
    assert _beats_default("ets", "revert", {"revert": 1.0, "ets": 0.9}, {"revert": default, "ets": steady}, 24)
    # two days of origins: no test can reach 5%, so every day must be won
    assert _beats_default(
        "ets", "revert", {"revert": 1.0, "ets": 0.9}, {"revert": default[:48], "ets": steady[:48]}, 24
    )
    mixed = np.concatenate([np.full(24, 0.5), np.full(10, 0.9), np.full(14, 1.2)])  # 34 of 48, one day of two
    # fewer origins than a block (under a day of them) are one block, which must be won
    assert _beats_default(
        "ets", "revert", {"revert": 1.0, "ets": 0.9}, {"revert": default[:10], "ets": steady[:10]}, 24
    )
    half = np.where(np.arange(10) < 7, 0.5, 2.5)  # better at 7 of 10 origins, worse on their mean
    assert not _beats_default("ets", "revert", {"revert": 1.0, "ets": 0.9}, {"revert": default[:10], "ets": half}, 24)
    two = {"revert": default[:48], "ets": mixed}
    assert _beats_default("ets", "revert", {"revert": 1.0, "ets": float(mixed.mean())}, two, 1)
    assert not _beats_default("ets", "revert", {"revert": 1.0, "ets": float(mixed.mean())}, two, 24)
