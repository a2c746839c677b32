"""``revert``: the latest demand, pulled part of the way toward where the series has stood lately.

These series move in long steps; a step often partly undoes itself (a burst of jobs ends, a
drained pool refills), so a day ahead the level is somewhere between where demand stands now
and where it has stood lately. The forecast for lead k (k = 1..horizon buckets after the
origin) is

    now + w[k] * (median of the last week before the origin - now)

where ``now`` is the latest sample (as `LatestModel`) and ``w[k]`` in [0, `MAX_WEIGHT`] is
chosen per lead time on the training window only: the weight on a grid of `GRID` steps with
the least mean absolute error over every origin inside the window whose lead-k target is
also inside it (ties go to the smaller weight, so a flat or short window gives ``latest``).
The week's median, not its mean: the forecast is scored (and its weights fitted) by absolute
error, whose best constant is the median; a few bursts, or a count that is mostly 0, lift the
mean away from where demand usually stands.
The weights are fitted lazily for the largest horizon asked for, from the training window
alone; forecasting at a later origin reads the history up to that origin and nothing after.

Pure numpy: no clock beyond the fit timer, no I/O.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .models import LatestModel, last_valid
from .series import WEEK

__all__ = ["GRID", "MAX_WEIGHT", "MIN_ORIGINS", "MIN_REVERT_S", "RevertModel"]

MAX_WEIGHT = 0.25  # the most the week's median may pull the forecast, at any lead time
GRID = 11  # weights tried: 0, 0.025, ..., 0.25
MIN_ORIGINS = 12  # a lead time with fewer training origins keeps weight 0 (the latest value)
MIN_REVERT_S = WEEK  # the selection offers `revert` only on a window of a week or more: its median is a week's


def _ffill(y: np.ndarray) -> np.ndarray:
    """NaN replaced by the previous finite value (leading NaNs stay)."""
    ok = ~np.isnan(y)
    idx = np.where(ok, np.arange(len(y)), -1)
    np.maximum.accumulate(idx, out=idx)
    out = np.full(len(y), math.nan)
    has = idx >= 0
    out[has] = y[idx[has]]
    return out


def _trailing_median(y: np.ndarray, window: int, first: int = 0) -> np.ndarray:
    """out[i] = median of the finite values in y[i+1-window : i+1] (NaN where there are none),
    for i >= `first` only (NaN before: the fit uses no origin there, and each median costs a window)."""
    out = np.full(len(y), math.nan)
    if first >= len(y):
        return out
    pad = np.concatenate((np.full(window - 1, math.nan), y))
    view = np.lib.stride_tricks.sliding_window_view(pad, window)[first:]
    with warnings.catch_warnings():  # an all-NaN stretch is NaN, as documented
        warnings.simplefilter("ignore", RuntimeWarning)
        out[first:] = np.nanmedian(view, axis=1)
    return out


class RevertModel(LatestModel):
    model = "revert"

    def __init__(self, series, lo, hi, season):
        super().__init__(series, lo, hi, season)
        self.window = max(1, int(round(WEEK / series.step_s)))
        self._weights = np.zeros(0)
        self._errors = np.full((1, 1), math.nan)
        self._fitted_for = 0

    # --- fitting, on the training window only ---------------------------------------------
    def _origin_state(self, first: int) -> tuple[np.ndarray, np.ndarray]:
        """For each training origin n (forecasting bucket lo+n onward from the buckets before
        it), ``now`` and the week's median minus ``now`` (NaN before index `first`); index i is
        origin i+1."""
        y = self.train
        now = y.copy()
        if self.latest is not None:
            lat = self.latest[self.lo : self.hi]
            now = np.where(np.isnan(lat), y, lat)
        now = _ffill(now)
        return now, _trailing_median(y, self.window, first) - now

    def _fit(self, horizon: int) -> None:
        t0 = time.perf_counter()
        y = self.train
        n = len(y)
        w = np.zeros(horizon)
        errors = np.full((1, horizon), math.nan)
        if n >= 2:
            # origin i+1 (after bucket i) forecasts y[i+1 : i+1+horizon]
            start = min(self.window, n // 2)  # origins with at least half the window (or a week) behind them
            now, diff = self._origin_state(max(start - 1, 0))
            idx = np.arange(max(start - 1, 0), n - 1)
            idx = idx[np.isfinite(now[idx]) & np.isfinite(diff[idx])]
            if len(idx):
                pad = np.concatenate((y, np.full(horizon, math.nan)))
                target = np.lib.stride_tricks.sliding_window_view(pad[1:], horizon)[idx]  # (origins, horizon)
                base = target - now[idx, None]  # the latest value's error, sign: actual - forecast
                d = diff[idx, None]
                grid = np.linspace(0.0, MAX_WEIGHT, GRID)
                ok = ~np.isnan(base)
                counts = ok.sum(axis=0)
                sae = np.stack([np.where(ok, np.abs(base - g * d), 0.0).sum(axis=0) for g in grid])
                best = np.argmin(sae, axis=0)  # the first (smallest) weight on a tie
                w = np.where(counts >= MIN_ORIGINS, grid[best], 0.0)
                errors = base - w[None, :] * d
        self._weights, self._errors, self._fitted_for = w, errors, horizon
        self.fit_s += time.perf_counter() - t0

    def weights(self, horizon: int) -> np.ndarray:
        """The per-lead weights on the week's median, fitted on the training window."""
        if horizon > self._fitted_for:
            self._fit(horizon)
        return self._weights[:horizon]

    # --- the Fitted interface ----------------------------------------------------------------
    def point(self, history, horizon):
        now = self._now(history)
        tail = history[-self.window :]
        ok = tail[~np.isnan(tail)]
        median = float(np.median(ok)) if len(ok) else now
        if not len(history) or math.isnan(last_valid(history)[0]):
            median = now
        return now + self.weights(horizon) * (median - now)

    def errors(self, horizon):
        self.weights(horizon)
        return self._errors[:, :horizon]
