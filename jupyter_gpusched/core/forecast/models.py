"""A fitted model's interface (point forecast, in-sample error band, conformal scores) and
the statistical models: the mean, the last value held, and the seasonal-naive baseline."""

from __future__ import annotations

import math

import numpy as np

from .series import Series

__all__ = [
    "BASELINES",
    "DEFAULT_INTERVAL",
    "MODELS",
    "Fitted",
    "LastValueModel",
    "LatestModel",
    "MeanModel",
    "SeasonalNaiveModel",
    "last_valid",
    "lead_errors",
]

DEFAULT_INTERVAL = 0.8
MODELS = (
    "latest",
    "revert",
    "time-of-day",
    "prophet-ar",
    "prophet",
    "ets",
    "theta",
    "seasonal-naive",
    "last-value",
    "mean",
)
BASELINES = ("seasonal-naive", "last-value")


def last_valid(y: np.ndarray) -> tuple[float, int]:
    """(last observed value, how many steps before the end it was); (nan, 0) if none."""
    ok = np.flatnonzero(~np.isnan(y))
    if len(ok) == 0:
        return math.nan, 0
    i = int(ok[-1])
    return float(y[i]), len(y) - 1 - i


def _quantiles(errors: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-column (lead time) error quantiles; columns with no finite value get 0."""
    lo_q, hi_q = (1 - interval) / 2, (1 + interval) / 2
    errors = np.atleast_2d(errors)
    lo = np.zeros(errors.shape[1])
    hi = np.zeros(errors.shape[1])
    finite = ~np.isnan(errors)
    cols = finite.any(axis=0)
    if cols.any():
        q = np.nanquantile(errors[:, cols], [lo_q, hi_q], axis=0)
        lo[cols], hi[cols] = q[0], q[1]
    return lo, hi


def lead_errors(r: np.ndarray, horizon: int, decay: np.ndarray) -> np.ndarray:
    """Errors of forecasting r[t+k] by decay[k-1] * r[t], for k = 1..horizon, over the window."""
    if len(r) <= horizon:
        return np.full((1, horizon), np.nan)
    w = np.lib.stride_tricks.sliding_window_view(r, horizon + 1)
    return w[:, 1:] - w[:, :1] * decay[None, :]


class Fitted:
    """A model fitted on `series.values[lo:hi]`. `predict(history, horizon)` forecasts the
    `horizon` buckets after `history` (the series' values up to the forecast origin, origin
    >= hi); it reads nothing past the origin."""

    model = ""

    def __init__(self, series: Series, lo: int, hi: int, season: int):
        self.start = series.start
        self.step_s = series.step_s
        self.lo, self.hi = lo, hi
        self.train = series.values[lo:hi]
        self.latest = series.latest  # each bucket's last sample, where the series has them
        self.season = season
        self.fit_s = 0.0
        self._band: dict[tuple[int, float], tuple[np.ndarray, np.ndarray]] = {}

    def point(self, history: np.ndarray, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def errors(self, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        """In-sample errors, shape (windows, horizon): column k-1 holds the k-step errors;
        or (windows, 1) when they are the same at every lead time."""
        raise NotImplementedError

    def band(self, horizon: int, interval: float) -> tuple[np.ndarray, np.ndarray]:
        key = (horizon, interval)
        if key not in self._band:
            lo, hi = _quantiles(self.errors(horizon), interval)
            if len(lo) == 1:
                lo, hi = np.full(horizon, lo[0]), np.full(horizon, hi[0])
            self._band[key] = (lo, hi)
        return self._band[key]

    def predict(self, history: np.ndarray, horizon: int, interval: float | None = DEFAULT_INTERVAL, scale: float = 1.0):
        """(point, lower, upper); lower/upper are None when `interval` is None. `scale`
        widens (or narrows) the in-sample band: the calibration `band_scale` finds."""
        p = np.maximum(np.nan_to_num(self.point(history, horizon), nan=0.0), 0.0)
        if interval is None:
            return p, None, None
        lo, hi = self.band(horizon, interval)
        lower = np.maximum(np.minimum(p + scale * lo, p), 0.0)
        upper = np.maximum(p + scale * hi, p)
        return p, lower, upper

    def band_scores(self, p: np.ndarray, actual: np.ndarray, interval: float) -> np.ndarray:
        """How far outside the in-sample band each actual value fell, in band widths (the
        conformal score: 1 is on the edge). Widths are floored so a flat band cannot make
        every miss infinite."""
        lo, hi = self.band(len(p), interval)
        ok = self.train[~np.isnan(self.train)]
        floor = 1e-3 + 0.01 * (float(np.abs(ok).mean()) if len(ok) else 0.0)
        above = actual >= p
        width = np.where(above, np.maximum(hi, floor), np.maximum(-lo, floor))
        out = np.abs(actual - p) / width
        return out[~np.isnan(actual)]


class MeanModel(Fitted):
    model = "mean"

    def __init__(self, series, lo, hi, season):
        super().__init__(series, lo, hi, season)
        ok = self.train[~np.isnan(self.train)]
        self.level = float(ok.mean()) if len(ok) else 0.0

    def point(self, history, horizon):
        return np.full(horizon, self.level)

    def errors(self, horizon):
        return (self.train - self.level)[:, None]


class LastValueModel(Fitted):
    model = "last-value"

    def point(self, history, horizon):
        v, _ = last_valid(history)
        return np.full(horizon, 0.0 if math.isnan(v) else v)

    def errors(self, horizon):
        return lead_errors(self.train, horizon, np.ones(horizon))


class LatestModel(Fitted):
    """The latest sample, held: where demand stood at the origin, not the mean of the bucket
    before it (a step inside that bucket shows only partly in its mean). Falls back to the
    last bucket's mean where the series has no samples (`Series.latest` is None)."""

    model = "latest"

    def _now(self, history: np.ndarray) -> float:
        n = len(history)
        if self.latest is not None and 0 < n <= len(self.latest):
            v, _ = last_valid(self.latest[:n])
            if not math.isnan(v):
                return v
        v, _ = last_valid(history)
        return 0.0 if math.isnan(v) else v

    def point(self, history, horizon):
        return np.full(horizon, self._now(history))

    def errors(self, horizon):
        if self.latest is None:
            return lead_errors(self.train, horizon, np.ones(horizon))
        lat = self.latest[self.lo : self.hi]
        if len(lat) <= horizon:
            return np.full((1, horizon), np.nan)
        w = np.lib.stride_tricks.sliding_window_view(self.train[1:], horizon)
        return w - lat[: len(w), None]


class SeasonalNaiveModel(Fitted):
    model = "seasonal-naive"

    def point(self, history, horizon):
        n, m = len(history), self.season
        last, _ = last_valid(history)
        k = np.arange(horizon)
        i = n + k - m * (1 + k // m)  # the same time of day in the last observed day
        inside = (i >= 0) & (i < n)
        out = np.full(horizon, math.nan)
        out[inside] = history[i[inside]]
        return np.nan_to_num(np.where(np.isnan(out), last, out), nan=0.0)

    def errors(self, horizon):
        m = self.season
        if m >= len(self.train):
            return np.full((1, 1), np.nan)
        return (self.train[m:] - self.train[:-m])[:, None]
