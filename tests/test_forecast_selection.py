"""The model set and the selection by backtest (core/forecast/statistical.py, selection.py):
the latest sample, ETS and Theta against statsmodels' own forecasts, origins spread over the
series, selection with no look-ahead that picks what the history rewards, the ensemble, and
the evaluation the benchmarks print."""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

from jupyter_gpusched.core import forecast as F
from jupyter_gpusched.core.forecast.statistical import EtsModel, ThetaModel

from conftest import level_steps

pytestmark = pytest.mark.timeout(120)
STEP = 600.0


def periodic(days: int, noise: float = 0.3, seed: int = 0) -> F.Series:
    """Demand with a strong daily shape (10 GPUs by day, 2 by night) and a little noise."""
    rng = np.random.default_rng(seed)
    day = np.where((np.arange(144) >= 48) & (np.arange(144) < 108), 10.0, 2.0)
    return F.Series(0.0, STEP, np.tile(day, days) + rng.normal(0, noise, 144 * days))


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

    s = level_steps(4, seed=3)
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
    flat = F.select(level_steps(8), 0, 8 * 144, 6, candidates=cands)
    assert flat is not None and flat.model == "latest", flat.why  # no challenger 5% better
    # a day ahead on 4 days of history (one day of origins: one outcome): the shape wins at every origin
    short = F.select(periodic(4), 0, 4 * 144, 144, candidates=cands)
    assert short is not None and short.model == "seasonal-naive" and short.origins > 0
    long_flat = F.select(level_steps(8), 0, 8 * 144, 144, candidates=cands)
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


def test_a_fit_that_does_not_converge_is_quiet_in_a_fresh_process():
    """ETS on an all-zero history fails to converge; the first fit in a process imports
    statsmodels' warning module, which must not undo the filter around the fit."""
    code = (
        "import numpy as np\n"
        "from jupyter_gpusched.core import forecast as F\n"
        "from jupyter_gpusched.core.forecast.statistical import EtsModel\n"
        "s = F.Series(0.0, 600.0, np.zeros(2016))\n"
        "EtsModel(s, 0, len(s), 144)\n"
    )
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr


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


def test_the_t_test_is_students():
    from jupyter_gpusched.core.forecast.selection import t_test_p

    # one degree of freedom is Cauchy: P(T <= t) = 1/2 + atan(t)/pi; here t = -2
    assert t_test_p(np.array([-1.0, -3.0])) == pytest.approx(0.5 + math.atan(-2.0) / math.pi, abs=1e-6)
    # two: P(T <= t) = 1/2 + t / (2 sqrt(2 + t^2)); here t = -2 sqrt(3)
    t = -2 * math.sqrt(3)
    assert t_test_p(np.array([-1.0, -2.0, -3.0])) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-6)
    assert t_test_p(np.array([3.0, 1.0, 2.0])) == pytest.approx(1 - 0.5 - t / (2 * math.sqrt(2 + t * t)), abs=1e-6)
    assert t_test_p(np.array([-0.1] * 5)) == 0.0  # no spread, below 0
    assert t_test_p(np.array([0.0] * 5)) == 1.0 and t_test_p(np.array([-1.0])) == 1.0 and t_test_p(np.zeros(0)) == 1.0


def test_a_challenger_must_win_two_independent_outcomes_in_three_and_where_they_are_few_a_t_test():
    from jupyter_gpusched.core.forecast.selection import _beats_default

    default = np.ones(120)

    def beats(challenger: np.ndarray, block: int, default: np.ndarray = default) -> bool:
        scores = {"revert": float(default.mean()), "ets": float(challenger.mean())}
        return _beats_default("ets", "revert", scores, {"revert": default, "ets": challenger}, block)

    # one great day, then four a little better: 12% better on average, at nearly every origin
    rng = np.random.default_rng(0)
    one_day = np.concatenate([np.full(24, 0.5), 0.98 + rng.normal(0, 0.005, 96)])
    assert not beats(one_day, 24)  # a day ahead the origins overlap: five outcomes, one of them good
    assert beats(one_day, 1)  # had the 120 origins been apart (an hour ahead), they would be 120 outcomes
    # better on average and by a t-test, but in under two outcomes in three: a few large gains
    few = np.where(np.arange(120) % 12 < 5, 0.3, 1.02)
    assert not beats(few, 1)
    # origins apart are tested by their count alone: 4 of 6 better is served, though a t-test would not pass it
    assert beats(np.array([0.5, 0.5, 0.5, 0.5, 1.3, 1.3]), 1, default[:6])
    # arrivals that follow the clock: a large gain at a few origins a day, a small loss at the rest;
    # better at one origin in six, yet better every day
    clock = np.tile(np.concatenate([np.full(4, 0.4), np.full(20, 1.05)]), 5) + rng.normal(0, 0.01, 120)
    assert float(np.mean(clock < 1)) < 0.2 and beats(clock, 24)
    assert beats(np.full(120, 0.9), 24)  # 10% better every day: no spread, served
    assert not beats(np.full(120, 0.97), 24)  # consistent but under the 5% margin
    # under two days of origins, a day ahead: one outcome, no spread to test; every origin must be better
    assert beats(np.full(30, 0.5), 24, default[:30])
    assert not beats(np.where(np.arange(30) < 27, 0.5, 1.01), 24, default[:30])
    worse_on_average = np.where(np.arange(120) < 80, 0.5, 2.5)  # better at 2 origins in 3
    assert not beats(worse_on_average, 1)
