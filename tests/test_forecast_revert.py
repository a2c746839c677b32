"""The ``revert`` model (core/forecast/revert.py): the latest demand pulled toward the week's
median by a per-lead weight in [0, 0.25] fitted on the training window only. Pure and
deterministic, reads nothing after its window or its origin, earns its pull only where the
history reverts, and degrades to the latest value on short or flat series."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_gpusched.core import forecast as F
from jupyter_gpusched.core.forecast.revert import MAX_WEIGHT, RevertModel

from conftest import working_day

pytestmark = pytest.mark.timeout(120)
STEP = 600.0
WEEK_STEPS = 1008


def reverting(days: int, seed: int = 0) -> F.Series:
    """An AR(1) around 20 GPUs (phi 0.99 per 10 minutes): a step is mostly undone a day later."""
    rng = np.random.default_rng(seed)
    x = np.empty(144 * days)
    x[0] = 20.0
    for i in range(1, len(x)):
        x[i] = 20.0 + 0.99 * (x[i - 1] - 20.0) + rng.normal(0, 1.5)
    return F.Series(0.0, STEP, x)


def test_the_forecast_is_the_latest_value_pulled_toward_the_weeks_median():
    s = reverting(16)
    m = F.fit("revert", s, 0, 14 * 144)
    assert isinstance(m, RevertModel) and m.model == "revert"
    origin = 15 * 144 + 37
    hist = s.values[:origin]
    w = m.weights(144)
    assert w.shape == (144,) and np.all((w >= 0) & (w <= MAX_WEIGHT))
    now, median = hist[-1], np.median(hist[-WEEK_STEPS:])
    assert np.allclose(m.point(hist, 144), now + w * (median - now))
    # a day ahead the AR(1) keeps 0.99**144 = 0.24 of a deviation: the pull is as large as allowed;
    # 10 minutes ahead it keeps 0.99 of it: (almost) no pull
    assert w[-1] == pytest.approx(MAX_WEIGHT) and w[0] <= 0.025
    # a shorter horizon asked first gives the same leads as the longer one
    assert np.array_equal(F.fit("revert", s, 0, 14 * 144).weights(6), w[:6])


def test_it_reads_nothing_after_its_window_or_its_origin_and_is_deterministic():
    s = reverting(16)
    hi = 14 * 144
    spoiled = F.Series(0.0, STEP, np.concatenate([s.values[:hi], np.full(len(s) - hi, 1e6)]))
    a, b = F.fit("revert", s, 0, hi), F.fit("revert", spoiled, 0, hi)
    assert np.array_equal(a.weights(144), b.weights(144))
    assert np.array_equal(a.errors(144), b.errors(144), equal_nan=True)
    origin = hi + 10
    p = a.point(s.values[:origin], 144)
    assert np.array_equal(p, b.point(s.values[:origin], 144))
    assert np.array_equal(p, F.fit("revert", s, 0, hi).point(s.values[:origin], 144))  # same inputs, same output
    # the latest per-minute sample after the origin is not read either
    lat = s.values.copy()
    with_latest = F.Series(0.0, STEP, s.values, lat)
    lat2 = lat.copy()
    lat2[origin:] = -5.0
    with_spoiled_latest = F.Series(0.0, STEP, s.values, lat2)
    pa = F.fit("revert", with_latest, 0, hi).point(s.values[:origin], 144)
    pb = F.fit("revert", with_spoiled_latest, 0, hi).point(s.values[:origin], 144)
    assert np.array_equal(pa, pb)


def test_it_starts_from_the_latest_sample_not_the_last_bucket_mean():
    values = np.full(14 * 144, 8.0)
    latest = values.copy()
    latest[-1] = 16.0  # demand stepped up inside the last bucket
    s = F.Series(0.0, STEP, values, latest)
    m = F.fit("revert", s, 0, len(s))
    assert np.allclose(m.point(values, 6), 16.0)  # a flat history: no pull was learnt


def test_rare_bursts_do_not_lift_the_level_it_pulls_toward():
    """A count that is mostly 0 with rare bursts: the week's mean sits above 0, its median at 0.
    A day ahead the fitted pull brings a burst back to 0, where the count usually is, and
    nowhere else (a pull toward the mean would leave every forecast above 0)."""
    rng = np.random.default_rng(7)
    x = np.where(rng.random(144 * 16) < 0.05, rng.poisson(30, 144 * 16), 0).astype(float)
    s = F.Series(0.0, STEP, x)
    m = F.fit("revert", s, 0, 14 * 144)
    hist = np.concatenate((x[: 15 * 144], [12.0]))  # a burst in the last bucket
    w = m.weights(144)
    assert w[-1] > 0
    assert np.allclose(m.point(hist, 144), 12.0 * (1 - w))  # pulled toward 0, the median
    assert np.allclose(m.point(hist[:-1][hist[:-1] == 0][-2000:], 144), 0.0)  # at the median, no pull at all


def test_it_beats_the_latest_value_a_day_ahead_where_demand_reverts():
    s = reverting(40, seed=3)
    bt = F.backtest(s, 144, ("revert", "latest"), train=14 * 144, first_origin=14 * 144, count=30, calibrate=False)
    assert bt.models["revert"].mase < 0.95 * bt.models["latest"].mase


def test_a_random_walk_learns_little_pull():
    rng = np.random.default_rng(5)
    jumps = np.where(rng.random(144 * 16) < 0.02, rng.normal(0, 8, 144 * 16), 0.0)
    s = F.Series(0.0, STEP, np.maximum(40 + np.cumsum(jumps), 0.0))
    bt = F.backtest(s, 144, ("revert", "latest"), train=14 * 144, first_origin=14 * 144, count=10, calibrate=False)
    # never far worse than holding the latest value: the pull is capped and fitted
    assert bt.models["revert"].mase <= 1.1 * bt.models["latest"].mase


@pytest.mark.parametrize("n", [0, 1, 2, 5, 20])
def test_short_series_give_the_latest_value(n):
    values = np.arange(n, dtype=float) % 3
    s = F.Series(0.0, STEP, values)
    m = F.fit("revert", s, 0, n)
    assert np.array_equal(m.weights(6), np.zeros(6))  # under MIN_ORIGINS origins: no pull
    expect = values[-1] if n else 0.0
    assert np.allclose(m.point(values, 6), expect)
    assert m.errors(6).shape[1] == 6


def test_constant_and_gappy_series():
    s = F.Series(0.0, STEP, np.full(3 * 144, 4.0))
    m = F.fit("revert", s, 0, len(s))
    assert np.array_equal(m.weights(144), np.zeros(144))  # nothing to learn: ties go to no pull
    assert np.allclose(m.point(s.values, 144), 4.0)
    p, lo, hi = m.predict(s.values, 144)
    assert np.allclose(p, 4.0) and np.allclose(lo, 4.0) and np.allclose(hi, 4.0)
    gappy = reverting(10).values.copy()
    gappy[::7] = np.nan
    gappy[-3:] = np.nan
    g = F.Series(0.0, STEP, gappy)
    mg = F.fit("revert", g, 0, len(g))
    out = mg.point(gappy, 144)
    assert np.all(np.isfinite(out))
    now, median = gappy[~np.isnan(gappy)][-1], np.nanmedian(gappy[-WEEK_STEPS:])
    assert np.allclose(out, now + mg.weights(144) * (median - now))
    nothing = F.Series(0.0, STEP, np.full(200, np.nan))
    assert np.allclose(F.fit("revert", nothing, 0, 200).point(nothing.values, 6), 0.0)


def test_revert_is_a_candidate_and_the_selections_default():
    assert "revert" in F.CANDIDATES and "revert" in F.MODELS
    assert F.selection.DEFAULT_MODEL == "revert"
    s = reverting(9)
    sel = F.select(s, 0, len(s), 144)
    assert sel is not None and "revert" in sel.mase and sel.default == "revert"
    # under a week of history there is no week's median: not a candidate, and the latest value is the default
    short = F.select(s, 0, 5 * 144, 6)
    assert short is not None and "revert" not in short.mase and short.model != "revert"
    assert short.default == "latest"
    served: list[str] = []
    bt = F.evaluate(s, 144, ("auto", "last-value"), train=8 * 144, first_origin=8 * 144 - 100, count=3, served=served)
    assert len(served) == 3 and set(bt.models) == {"auto", "last-value"}


def test_a_daily_shape_moves_the_forecast_where_the_series_has_one():
    s = working_day(16)
    m = F.fit("revert", s, 0, 14 * 144)
    assert m.shape_weight(144) >= 0.5
    origin = 15 * 144 + 20  # early morning: demand will rise toward midday
    hist = s.values[:origin]
    p = m.point(hist, 144)
    now, median = hist[-1], np.median(hist[-WEEK_STEPS:])
    assert not np.allclose(p, now + m.weights(144) * (median - now))  # the shape moves it
    assert 40 < p.argmax() < 100  # the forecast peaks toward midday, not at the origin
    bt = F.backtest(
        working_day(40, seed=2),
        144,
        ("revert", "latest"),
        train=14 * 144,
        first_origin=14 * 144,
        count=20,
        calibrate=False,
    )
    assert bt.models["revert"].mase < 0.8 * bt.models["latest"].mase


def test_step_series_serve_no_daily_shape():
    """Where demand steps (the reverting AR(1), a random walk of jumps) the best shape weight
    trims the training error by chance, under the margin: none is served."""
    assert F.fit("revert", reverting(16), 0, 14 * 144).shape_weight(144) == 0.0
    rng = np.random.default_rng(5)
    jumps = np.where(rng.random(144 * 16) < 0.02, rng.normal(0, 8, 144 * 16), 0.0)
    walk = F.Series(0.0, STEP, np.maximum(40 + np.cumsum(jumps), 0.0))
    assert F.fit("revert", walk, 0, 14 * 144).shape_weight(144) == 0.0


def test_the_daily_shape_reads_nothing_after_the_window_or_the_origin():
    s = working_day(16, seed=4)
    hi = 14 * 144
    spoiled = F.Series(0.0, STEP, np.concatenate([s.values[:hi], np.full(len(s) - hi, 1e6)]))
    a, b = F.fit("revert", s, 0, hi), F.fit("revert", spoiled, 0, hi)
    assert a.shape_weight(144) > 0 and a.shape_weight(144) == b.shape_weight(144)
    assert np.array_equal(a.errors(144), b.errors(144), equal_nan=True)
    origin = hi + 50
    assert np.array_equal(a.point(s.values[:origin], 144), b.point(s.values[:origin], 144))


def test_daily_buckets_have_no_daily_shape():
    rng = np.random.default_rng(1)
    s = F.Series(0.0, 86400.0, rng.poisson(10, 120).astype(float))
    assert F.fit("revert", s, 0, 100).shape_weight(1) == 0.0
