"""The ``time-of-day`` model (core/forecast/timeofday.py): the latest demand pulled toward the
median of the same time of day over the last week, by a per-lead weight in [0, 1] fitted on the
training window only. Pure and deterministic, reads nothing after its window or its origin,
follows a daily shape where there is one, and is served by the selection only where its
backtest says so (a margin and a t-test over independent outcomes)."""

from __future__ import annotations

import numpy as np
import pytest

from jupyter_gpusched.core import forecast as F
from jupyter_gpusched.core.forecast.series import daily_shape
from jupyter_gpusched.core.forecast.timeofday import TimeOfDayModel

from conftest import level_steps, working_day

pytestmark = pytest.mark.timeout(120)
STEP = 600.0
DAY_STEPS = 144


def test_the_shape_is_the_median_of_the_same_time_on_the_days_before():
    y = np.arange(10 * 4, dtype=float)  # 10 days of 4 buckets
    shape = daily_shape(y, 4, len(y) + 4)
    t = 8 * 4 + 1
    assert shape[t] == np.median([y[t - 4 * d] for d in range(1, 8)])
    assert shape[5] == y[1]  # one day behind: that day alone
    assert np.isnan(shape[2])  # no day behind
    assert shape[len(y) + 2] == np.median([y[len(y) + 2 - 4 * d] for d in range(1, 8)])  # ahead of the data


def test_it_follows_the_daily_shape_and_beats_the_baselines_a_day_ahead():
    s = working_day(16)
    m = F.fit("time-of-day", s, 0, 14 * DAY_STEPS)
    assert isinstance(m, TimeOfDayModel) and m.model == "time-of-day"
    w = m.weights(DAY_STEPS)
    assert w.shape == (DAY_STEPS,) and np.all((w >= 0) & (w <= 1))
    assert w[-1] >= 0.7  # a day ahead, the week's hours say more than the latest noisy bucket
    origin = 15 * DAY_STEPS + 20  # early morning: demand will rise toward midday
    p = m.point(s.values[:origin], DAY_STEPS)
    assert 40 < p.argmax() < 100
    bt = F.backtest(
        working_day(40, seed=2),
        DAY_STEPS,
        ("time-of-day", "revert", "latest", "seasonal-naive"),
        train=14 * DAY_STEPS,
        first_origin=14 * DAY_STEPS,
        count=20,
        calibrate=False,
    )
    mase = {k: v.mase for k, v in bt.models.items()}
    assert mase["time-of-day"] < 0.8 * min(mase["latest"], mase["revert"], mase["seasonal-naive"])


def test_it_reads_nothing_after_its_window_or_its_origin_and_is_deterministic():
    s = working_day(16, seed=4)
    hi = 14 * DAY_STEPS
    spoiled = F.Series(0.0, STEP, np.concatenate([s.values[:hi], np.full(len(s) - hi, 1e6)]))
    a, b = F.fit("time-of-day", s, 0, hi), F.fit("time-of-day", spoiled, 0, hi)
    assert np.array_equal(a.weights(DAY_STEPS), b.weights(DAY_STEPS))
    assert np.array_equal(a.errors(DAY_STEPS), b.errors(DAY_STEPS), equal_nan=True)
    origin = hi + 50
    p = a.point(s.values[:origin], DAY_STEPS)
    assert np.array_equal(p, b.point(s.values[:origin], DAY_STEPS))
    assert np.array_equal(p, F.fit("time-of-day", s, 0, hi).point(s.values[:origin], DAY_STEPS))


def test_without_a_day_of_buckets_it_is_the_latest_value():
    rng = np.random.default_rng(1)
    daily = F.Series(0.0, 86400.0, rng.poisson(10, 120).astype(float))
    m = F.fit("time-of-day", daily, 0, 100)
    assert not m.weights(3).any() and np.allclose(m.point(daily.values[:100], 3), daily.values[99])
    for n in (0, 1, 5, 20):
        short = F.Series(0.0, STEP, np.arange(n, dtype=float))
        ms = F.fit("time-of-day", short, 0, n)
        assert np.allclose(ms.point(short.values, 6), short.values[-1] if n else 0.0)
        assert ms.errors(6).shape[1] == 6
    gappy = working_day(10).values.copy()
    gappy[::5] = np.nan
    g = F.Series(0.0, STEP, gappy)
    assert np.all(np.isfinite(F.fit("time-of-day", g, 0, len(g)).point(gappy, DAY_STEPS)))


def test_the_selection_serves_it_where_demand_follows_the_clock_and_not_where_it_steps():
    assert "time-of-day" in F.CANDIDATES and "time-of-day" in F.MODELS
    clock = working_day(14, seed=5)
    sel = F.select(clock, 0, len(clock), DAY_STEPS)
    assert sel is not None and sel.model == "time-of-day", sel.why
    stepping = level_steps(14, seed=6)
    sel = F.select(stepping, 0, len(stepping), DAY_STEPS)
    assert sel is not None and "time-of-day" in sel.mase and sel.model != "time-of-day", sel.why
    # under a day of fit window there is no time of day to learn: not a candidate
    short = F.select(clock, 0, 20 * 6, 6)
    assert short is not None and "time-of-day" not in short.mase
