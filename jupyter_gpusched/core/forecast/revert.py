"""``revert``: the latest demand, pulled part of the way toward where the series has stood lately,
and moved along its daily shape where it has one.

These series move in long steps; a step often partly undoes itself (a burst of jobs ends, a
drained pool refills), so a day ahead the level is somewhere between where demand stands now
and where it has stood lately. The forecast for lead k (k = 1..horizon buckets after the
origin) is

    now + w[k] * (median of the last week before the origin - now) + v * (shape[k] - shape[0])

where ``now`` is the latest sample (as `LatestModel`) and ``w[k]`` in [0, `MAX_WEIGHT`] is
chosen per lead time on the training window only: the weight on a grid of `GRID` steps with
the least mean absolute error over every origin inside the window whose lead-k target is
also inside it (ties go to the smaller weight, so a flat or short window gives ``latest``).
The week's median, not its mean: the forecast is scored (and its weights fitted) by absolute
error, whose best constant is the median; a few bursts, or a count that is mostly 0, lift the
mean away from where demand usually stands.

The daily shape: ``shape[k]`` is the median of the same time of day as lead k over the
`SHAPE_DAYS` days before the origin (``shape[0]``: the origin's own time of day), so the term
moves the forecast as demand usually moves between now and then: arrivals that follow the
working day, not the steps of long jobs. One weight ``v`` in [0, 1] for every lead up to a
day (grid of `SHAPE_GRID`), fitted with the ``w[k]`` on the same origins, and kept only when
it cuts the training window's absolute error by `SHAPE_MARGIN` (the selection's margin for a
challenger): on step-like series the best ``v`` lowers the error a little by chance, and
served there it cost more than it gained. Without a daily shape (buckets of half a day or
more, under two days of origins, or the margin not met) ``v`` is 0 and the forecast is the
pull alone.
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
from .series import DAY, SHAPE_DAYS, WEEK, daily_shape, ffill

__all__ = [
    "GRID",
    "MAX_WEIGHT",
    "MIN_ORIGINS",
    "MIN_REVERT_S",
    "SHAPE_DAYS",
    "SHAPE_GRID",
    "SHAPE_MARGIN",
    "RevertModel",
]

MAX_WEIGHT = 0.25  # the most the week's median may pull the forecast, at any lead time
GRID = 11  # weights tried: 0, 0.025, ..., 0.25
MIN_ORIGINS = 12  # a lead time with fewer training origins keeps weight 0 (the latest value)
MIN_REVERT_S = WEEK  # the selection offers `revert` only on a window of a week or more: its median is a week's
SHAPE_GRID = 11  # daily-shape weights tried: 0, 0.1, ..., 1
SHAPE_MARGIN = 0.05  # kept only where it cuts the training window's error by 5% (selection.SELECT_MARGIN)


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


def _sae(
    base: np.ndarray, ok: np.ndarray, pull: np.ndarray, w: float | np.ndarray, move: float | np.ndarray, v: float
) -> np.ndarray:
    """Per lead: the sum of absolute errors of the forecast with pull weight `w` and shape weight `v`."""
    return np.where(ok, np.abs(base - w * pull - v * move), 0.0).sum(axis=0)


class RevertModel(LatestModel):
    model = "revert"
    max_weight = MAX_WEIGHT
    shape_term = True  # the daily shape's term (`TimeOfDayModel` pulls toward the shape itself)

    def __init__(self, series, lo, hi, season):
        super().__init__(series, lo, hi, season)
        self.window = max(1, int(round(WEEK / series.step_s)))
        self._weights = np.zeros(0)
        self._shape = np.zeros(0)  # v on each lead it applies to: 0 where no daily shape is worth serving
        self._errors = np.full((1, 1), math.nan)
        self._fitted_for = 0

    @property
    def has_days(self) -> bool:
        """A day of several buckets: a time of day to follow (not on daily buckets)."""
        return self.season > 1 and self.step_s < DAY / 2

    # --- fitting, on the training window only ---------------------------------------------
    def _now_at_origins(self) -> np.ndarray:
        """Where demand stood at the end of each bucket of the training window (its last sample,
        else its mean), carried over gaps: index i is ``now`` at origin i+1."""
        now = self.train.copy()
        if self.latest is not None:
            lat = self.latest[self.lo : self.hi]
            now = np.where(np.isnan(lat), now, lat)
        return ffill(now)

    def _pull(self, y: np.ndarray, idx: np.ndarray, now: np.ndarray, horizon: int) -> np.ndarray:
        """For each training origin (after bucket i in `idx`): where the forecast is pulled
        toward, less ``now`` (one column: the same at every lead). NaN: no target there."""
        first = int(idx[0]) if len(idx) else len(y)
        return (_trailing_median(y, self.window, first)[idx] - now[idx])[:, None]

    def _pull_from(self, history: np.ndarray, now: float, horizon: int) -> np.ndarray:
        """The same at a forecast origin, from the history up to it."""
        tail = history[-self.window :]
        ok = tail[~np.isnan(tail)]
        if not len(ok) or math.isnan(last_valid(history)[0]):
            return np.zeros(horizon)
        return np.full(horizon, float(np.median(ok)) - now)

    def _fit(self, horizon: int) -> None:
        t0 = time.perf_counter()
        y = self.train
        n = len(y)
        w = np.zeros(horizon)
        v = np.zeros(horizon)
        errors = np.full((1, horizon), math.nan)
        if n >= 2:
            # origin i+1 (after bucket i) forecasts y[i+1 : i+1+horizon]; origins with at least
            # half the window (or a week) behind them
            now = self._now_at_origins()
            idx = np.arange(max(min(self.window, n // 2) - 1, 0), n - 1)
            idx = idx[np.isfinite(now[idx])]
            pull = self._pull(y, idx, now, horizon)
            keep = np.isfinite(pull).all(axis=1)
            idx, pull = idx[keep], pull[keep]
            if len(idx):
                pad = np.concatenate((y, np.full(horizon, math.nan)))
                target = np.lib.stride_tricks.sliding_window_view(pad[1:], horizon)[idx]  # (origins, horizon)
                base = target - now[idx, None]  # the latest value's error, sign: actual - forecast
                grid = np.linspace(0.0, self.max_weight, GRID)
                ok = ~np.isnan(base)
                fitted = ok.sum(axis=0) >= MIN_ORIGINS  # leads with too few origins keep weight 0
                sae = np.stack([_sae(base, ok, pull, g, 0.0, 0.0) for g in grid])
                w = np.where(fitted, grid[np.argmin(sae, axis=0)], 0.0)  # the first (smallest) weight on a tie
                errors = base - w[None, :] * pull
                m = self.season
                # a shape needs 2 days of origins
                daily = self.shape_term and self.has_days and len(idx) >= 2 * m
                move = self._shape_moves(y, idx, horizon) if daily else None
                if move is not None and fitted.any():
                    without = sae.min(axis=0)[fitted].sum()
                    best = (without, 0.0, w)
                    for shape_w in np.linspace(0.0, 1.0, SHAPE_GRID)[1:]:
                        by_w = np.stack([_sae(base, ok, pull, g, move, shape_w) for g in grid])
                        total = by_w.min(axis=0)[fitted].sum()
                        if total < best[0]:
                            best = (total, shape_w, np.where(fitted, grid[np.argmin(by_w, axis=0)], 0.0))
                    if best[1] > 0 and best[0] <= (1 - SHAPE_MARGIN) * without:
                        w = best[2]
                        v = np.where(fitted & (np.arange(1, horizon + 1) <= m), best[1], 0.0)
                        errors = base - w[None, :] * pull - v[None, :] * move
        self._weights, self._shape, self._errors, self._fitted_for = w, v, errors, horizon
        self.fit_s += time.perf_counter() - t0

    def _shape_moves(self, y: np.ndarray, idx: np.ndarray, horizon: int) -> np.ndarray:
        """For each training origin (after bucket i in `idx`) and lead k: the daily shape at
        i + k less the shape at i; 0 past a day ahead."""
        shape = daily_shape(y, self.season, len(y) + horizon)
        leads = np.arange(1, horizon + 1)
        move = shape[idx[:, None] + leads[None, :]] - shape[idx, None]
        move[:, leads > self.season] = 0.0
        return np.nan_to_num(move, nan=0.0)

    def weights(self, horizon: int) -> np.ndarray:
        """The per-lead weights on the pull's target (`revert`: the week's median), fitted on the training window."""
        if horizon > self._fitted_for:
            self._fit(horizon)
        return self._weights[:horizon]

    # --- the Fitted interface ----------------------------------------------------------------
    def point(self, history, horizon):
        now = self._now(history)
        forecast = now + self.weights(horizon) * self._pull_from(history, now, horizon)
        v = self._shape[:horizon]
        if v.any() and len(history):
            m = self.season
            recent = history[-(SHAPE_DAYS * m + 1) :]  # the shape reads the last SHAPE_DAYS days only
            n = len(recent)
            shape = daily_shape(recent, m, n + horizon)
            forecast = forecast + v * np.nan_to_num(shape[n : n + horizon] - shape[n - 1], nan=0.0)
        return forecast

    def shape_weight(self, horizon: int) -> float:
        """v: the weight on the daily shape, fitted on the training window (0: none served)."""
        self.weights(horizon)
        return float(self._shape[:horizon].max(initial=0.0))

    def errors(self, horizon):
        self.weights(horizon)
        return self._errors[:, :horizon]
