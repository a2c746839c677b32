"""GPU-demand forecasting: Prophet with daily and weekly seasonality, simple baselines, and
rolling-origin backtests so every forecast can show its own skill.

Pure: arrays in, arrays out. No I/O of ours, no clock (times are handed in as epoch
seconds); the only wall-clock reads time fits (`fit_s`), which never change a result.
Prophet is imported lazily, inside the fit, so the scheduler core loads without it.
(Prophet's Stan backend writes temporary files while it optimizes; that is its business.)

Resolution. Demand is recorded per minute, but a Prophet fit on a week of per-minute
points (10,080) takes ~7 s on a small machine, so every model works on **10-minute means**
(`DEFAULT_STEP_S`): a week is 1,008 points and fits in ~0.3 s. Forecasts, baselines and
backtest errors are all on that grid.

Models (`MODELS`):
- ``prophet-ar`` (the default): Prophet (daily seasonality, plus weekly once the history
  spans two weeks) anchored on the latest demand: an AR(1) on Prophet's in-sample
  residuals carries the current deviation from the seasonal pattern forward, fading with
  the lead time. Prophet alone knows the shape of a day; the anchor knows where today is.
- ``prophet``: Prophet alone.
- ``seasonal-naive``: the value one season (a day) earlier.
- ``last-value``: the latest value, held.
- ``mean``: the mean of the history.

Uncertainty band: for every model and lead time k, the point forecast plus the empirical
`(1 - interval) / 2` and `(1 + interval) / 2` quantiles of that model's own k-step errors
on its training window (deterministic; Prophet's sampled intervals are not used). The band
always contains the point forecast, and nothing goes below 0 GPUs.

With too little history `choose_model` falls back, and says so in the note: no history: no
forecast; less than a day: ``mean``; less than two days (Prophet's daily seasonality needs
two cycles) or Prophet not installed or failing: ``seasonal-naive``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "DAY",
    "DEFAULT_STEP_S",
    "MODELS",
    "BacktestResult",
    "Forecast",
    "Series",
    "backtest",
    "choose_model",
    "fit",
    "fit_model",
    "forecast",
    "forecast_report",
    "mase",
    "regularize",
    "smape",
]

DAY = 86400.0
WEEK = 7 * DAY
DEFAULT_STEP_S = 600.0
DEFAULT_INTERVAL = 0.8
MIN_PROPHET_S = 2 * DAY  # Prophet's daily seasonality needs two cycles
MIN_WEEKLY_S = 2 * WEEK  # weekly seasonality needs two weeks
MODELS = ("prophet-ar", "prophet", "seasonal-naive", "last-value", "mean")
BASELINES = ("seasonal-naive", "last-value")


# --- the series --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    """Values on a regular grid: `values[i]` is the mean over [start + i*step, start + (i+1)*step).
    NaN marks a bucket with no observation."""

    start: float
    step_s: float
    values: np.ndarray

    def __post_init__(self) -> None:
        if not (self.step_s > 0 and math.isfinite(self.step_s)):
            raise ValueError("step_s must be a positive number of seconds")
        object.__setattr__(self, "values", np.asarray(self.values, dtype=float))

    def __len__(self) -> int:
        return len(self.values)

    @property
    def times(self) -> np.ndarray:
        return self.start + self.step_s * np.arange(len(self.values))

    def time_of(self, index: int) -> float:
        return self.start + self.step_s * index

    @property
    def observed(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.values)))

    @property
    def span_s(self) -> float:
        """Seconds from the first to the end of the last observed bucket."""
        ok = np.flatnonzero(~np.isnan(self.values))
        return 0.0 if len(ok) == 0 else float((ok[-1] - ok[0] + 1) * self.step_s)

    def tail(self, seconds: float) -> Series:
        """The last `seconds` of the series."""
        n = int(round(seconds / self.step_s))
        if n >= len(self.values):
            return self
        cut = len(self.values) - n
        return Series(self.time_of(cut), self.step_s, self.values[cut:])


def regularize(times: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray, step_s: float = DEFAULT_STEP_S) -> Series:
    """Bucket samples at epoch seconds `times` into a grid of `step_s` (aligned on multiples
    of `step_s`): the mean of each bucket, NaN where a bucket has no sample."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.shape != v.shape:
        raise ValueError("times and values must have the same length")
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    if len(t) == 0:
        return Series(0.0, step_s, np.zeros(0))
    b = np.floor(t / step_s).astype(np.int64)
    b0 = int(b.min())
    idx = b - b0
    n = int(idx.max()) + 1
    sums = np.bincount(idx, weights=v, minlength=n)
    counts = np.bincount(idx, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return Series(b0 * step_s, step_s, out)


# --- error measures --------------------------------------------------------------------------
def _scale(train: np.ndarray, season: int) -> float:
    """MASE denominator: in-sample MAE of the seasonal-naive forecast (lag `season`), else
    of the one-step naive forecast when the window is shorter than a season or flat at lag m."""
    for lag in (season, 1):
        if 0 < lag < len(train):
            d = np.abs(train[lag:] - train[:-lag])
            d = d[~np.isnan(d)]
            if len(d) and d.mean() > 0:
                return float(d.mean())
    return math.nan


def mase(actual: np.ndarray, pred: np.ndarray, train: np.ndarray, season: int) -> float:
    """Mean absolute scaled error (Hyndman & Koehler 2006), scaled by the in-sample MAE of
    the seasonal-naive forecast on `train`. NaN when the scale is 0 or nothing is observed."""
    ok = ~np.isnan(actual)
    if not ok.any():
        return math.nan
    s = _scale(train, season)
    if not s > 0:
        return math.nan
    return float(np.mean(np.abs(actual[ok] - pred[ok])) / s)


def smape(actual: np.ndarray, pred: np.ndarray) -> float:
    """Symmetric MAPE in percent (0-200): 200/n * sum |F-A| / (|A| + |F|); a step where both
    are 0 counts as 0."""
    ok = ~np.isnan(actual)
    if not ok.any():
        return math.nan
    a, f = actual[ok], pred[ok]
    den = np.abs(a) + np.abs(f)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(den > 0, 2.0 * np.abs(f - a) / den, 0.0)
    return float(100.0 * terms.mean())


# --- models ------------------------------------------------------------------------------------
def _last_valid(y: np.ndarray) -> tuple[float, int]:
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


def _lead_errors(r: np.ndarray, horizon: int, decay: np.ndarray) -> np.ndarray:
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


def band_scale(scores: Sequence[float] | np.ndarray, interval: float, min_scores: int = 6) -> float:
    """Split-conformal calibration: the factor by which in-sample bands must be widened so
    that `interval` of past out-of-sample misses would have fallen inside. 1.0 (no change)
    with fewer than `min_scores` scores."""
    s = np.asarray(scores, dtype=float)
    s = s[np.isfinite(s)]
    n = len(s)
    if n < min_scores:
        return 1.0
    level = min(1.0, math.ceil((n + 1) * interval) / n)  # the finite-sample correction
    return float(np.quantile(s, level))


class _Mean(Fitted):
    model = "mean"

    def __init__(self, series, lo, hi, season):
        super().__init__(series, lo, hi, season)
        ok = self.train[~np.isnan(self.train)]
        self.level = float(ok.mean()) if len(ok) else 0.0

    def point(self, history, horizon):
        return np.full(horizon, self.level)

    def errors(self, horizon):
        return (self.train - self.level)[:, None]


class _LastValue(Fitted):
    model = "last-value"

    def point(self, history, horizon):
        v, _ = _last_valid(history)
        return np.full(horizon, 0.0 if math.isnan(v) else v)

    def errors(self, horizon):
        return _lead_errors(self.train, horizon, np.ones(horizon))


class _SeasonalNaive(Fitted):
    model = "seasonal-naive"

    def point(self, history, horizon):
        n, m = len(history), self.season
        last, _ = _last_valid(history)
        out = np.empty(horizon)
        for k in range(horizon):
            i = n + k - m * (1 + k // m)  # the same time of day in the last observed day
            v = history[i] if 0 <= i < n else math.nan
            out[k] = last if math.isnan(v) else v
        return np.nan_to_num(out, nan=0.0)

    def errors(self, horizon):
        m = self.season
        if m >= len(self.train):
            return np.full((1, 1), np.nan)
        return (self.train[m:] - self.train[:-m])[:, None]


class _Prophet(Fitted):
    """Prophet fitted once; its seasonal curve is evaluated (and cached) on demand for any
    bucket after the training window. `anchor` adds the AR(1) residual correction."""

    def __init__(self, series, lo, hi, season, anchor: bool, weekly: bool, daily: bool = True):
        super().__init__(series, lo, hi, season)
        self.anchor = anchor
        self.model = "prophet-ar" if anchor else "prophet"
        self.weekly = weekly
        import pandas as pd

        Prophet = _import_prophet()
        self._pd = pd
        t0 = time.perf_counter()
        idx = np.flatnonzero(~np.isnan(self.train))
        df = pd.DataFrame({"ds": self._ds(lo + idx), "y": self.train[idx]})
        self.m = Prophet(
            daily_seasonality=daily,
            weekly_seasonality=weekly,
            yearly_seasonality=False,
            uncertainty_samples=0,
        )
        self.m.fit(df)
        self.fit_s = time.perf_counter() - t0
        self._yhat = self._eval(lo, hi)  # in-sample
        self._cache_lo, self._cache = hi, np.zeros(0)
        r = self.train - self._yhat
        self.resid = r
        a, b = r[1:], r[:-1]
        ok = ~(np.isnan(a) | np.isnan(b))
        den = float(np.dot(b[ok], b[ok]))
        self.phi = min(max(float(np.dot(a[ok], b[ok])) / den, 0.0), 0.999) if den > 0 else 0.0

    def variant(self, anchor: bool) -> _Prophet:
        """The same fit, with or without the anchor (fits are shared in backtests)."""
        import copy

        out = copy.copy(self)
        out.anchor = anchor
        out.model = "prophet-ar" if anchor else "prophet"
        out._band = {}
        return out

    def decay(self, horizon: int) -> np.ndarray:
        """How much of the residual at the origin is left k steps later (k = 1..horizon)."""
        return self.phi ** np.arange(1, horizon + 1)

    def _ds(self, idx: np.ndarray):
        # Prophet wants naive timestamps; UTC wall time keeps days aligned with the data.
        return self._pd.to_datetime(self.start + self.step_s * np.asarray(idx, dtype=float), unit="s")

    def _eval(self, lo: int, hi: int) -> np.ndarray:
        if hi <= lo:
            return np.zeros(0)
        out = self.m.predict(self._pd.DataFrame({"ds": self._ds(np.arange(lo, hi))}))
        return out["yhat"].to_numpy(dtype=float)

    def curve(self, lo: int, hi: int) -> np.ndarray:
        """Prophet's fitted curve for buckets [lo, hi) with lo >= the end of training."""
        c_lo = self._cache_lo
        if lo < c_lo or hi > c_lo + len(self._cache):
            new_hi = max(hi, c_lo + len(self._cache)) + int(DAY // self.step_s)
            self._cache_lo = min(lo, c_lo)
            self._cache = self._eval(self._cache_lo, new_hi)
        a = lo - self._cache_lo
        return self._cache[a : a + (hi - lo)]

    def point(self, history, horizon):
        n = len(history)
        if not self.anchor:
            return self.curve(n, n + horizon)
        last, ago = _last_valid(history)
        if math.isnan(last):
            return self.curve(n, n + horizon)
        j = n - 1 - ago  # index of the last observation
        base = self._yhat[j - self.lo] if j < self.hi else self.curve(j, j + 1)[0]
        c = self.curve(n, n + horizon)
        d = self.decay(horizon + ago)[ago:]
        return c + (last - base) * d

    def errors(self, horizon):
        if not self.anchor:
            return self.resid[:, None]
        return _lead_errors(self.resid, horizon, self.decay(horizon))


def _import_prophet():
    """Import Prophet quietly (its plotting and Stan progress chatter off)."""
    import logging

    logging.getLogger("prophet.plot").setLevel(logging.CRITICAL)  # "Importing plotly failed"
    from prophet import Prophet

    logging.getLogger("prophet").setLevel(logging.WARNING)
    try:
        from cmdstanpy.utils import get_logger

        get_logger().setLevel(logging.WARNING)
    except ImportError:  # pragma: no cover - other Stan backends
        pass
    return Prophet


def season_steps(step_s: float) -> int:
    return max(1, int(round(DAY / step_s)))


def fit(model: str, series: Series, lo: int = 0, hi: int | None = None) -> Fitted:
    """Fit `model` on `series.values[lo:hi]`. Raises ImportError when Prophet is missing."""
    hi = len(series) if hi is None else hi
    m = season_steps(series.step_s)
    if model in ("prophet-ar", "prophet"):
        span = (hi - lo) * series.step_s
        return _Prophet(series, lo, hi, m, anchor=model == "prophet-ar", weekly=span >= MIN_WEEKLY_S)
    cls = {"seasonal-naive": _SeasonalNaive, "last-value": _LastValue, "mean": _Mean}.get(model)
    if cls is None:
        raise ValueError(f"unknown model {model!r}; use one of {', '.join(MODELS)}")
    t0 = time.perf_counter()
    out = cls(series, lo, hi, m)
    out.fit_s = time.perf_counter() - t0
    return out


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds < 2 * DAY else f"{seconds / DAY:.1f} days"


def choose_model(series: Series, wanted: str = "auto") -> tuple[str | None, str]:
    """The model to use on this history, and a sentence saying why (fallbacks say so)."""
    span = series.span_s
    if series.observed == 0:
        return None, "no demand history yet: no forecast"
    if wanted not in ("auto", *MODELS):
        raise ValueError(f"unknown model {wanted!r}; use auto or one of {', '.join(MODELS)}")
    ok = series.values[~np.isnan(series.values)]
    if wanted == "auto" and float(ok.max() - ok.min()) == 0.0:
        return "mean", f"demand has been constant ({ok[0]:g} GPUs) over the {_hours(span)} of history: forecasting that value"
    if wanted in ("auto", "prophet-ar", "prophet") and span < DAY:
        return "mean", f"only {_hours(span)} of history (a seasonal model needs a day): falling back to the mean"
    if wanted in ("auto", "prophet-ar", "prophet") and span < MIN_PROPHET_S:
        return "seasonal-naive", (
            f"only {_hours(span)} of history (Prophet needs 2 days): falling back to seasonal-naive (same time yesterday)"
        )
    if wanted == "seasonal-naive" and span < DAY:
        return "mean", f"only {_hours(span)} of history (seasonal-naive needs a day): falling back to the mean"
    if wanted in ("auto", "prophet-ar", "prophet"):
        name = "prophet" if wanted == "prophet" else "prophet-ar"
        weekly = "daily and weekly" if span >= MIN_WEEKLY_S else "daily (weekly needs 2 weeks of history)"
        anchor = ", anchored on the latest demand (AR(1) on its residuals)" if name == "prophet-ar" else ""
        return name, f"Prophet with {weekly} seasonality{anchor}, fitted on {_hours(span)} of history"
    return wanted, f"{wanted} forecast as asked, from {_hours(span)} of history"


# --- forecasting -------------------------------------------------------------------------------
@dataclass
class Forecast:
    times: np.ndarray  # epoch seconds: the start of each forecast bucket
    values: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    model: str | None
    note: str
    step_s: float
    interval: float
    fit_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        r = lambda a: [round(float(x), 3) for x in a]  # noqa: E731
        return {
            "times": r(self.times),
            "values": r(self.values),
            "lower": r(self.lower),
            "upper": r(self.upper),
            "model": self.model,
            "note": self.note,
            "step_s": self.step_s,
            "interval": self.interval,
            "fit_s": round(self.fit_s, 3),
        }


def forecast(
    series: Series, horizon: int, model: str = "auto", interval: float = DEFAULT_INTERVAL, max_history_s: float | None = 28 * DAY
) -> Forecast:
    """Forecast the `horizon` buckets after the end of `series` (the last `max_history_s` of
    it are used). Falls back (and says so) when the history is too short or Prophet fails."""
    if max_history_s is not None:
        series = series.tail(max_history_s)
    return _forecast(series, horizon, model, interval)[0]


def _forecast(series: Series, horizon: int, model: str, interval: float) -> tuple[Forecast, Fitted | None]:
    if horizon < 1:
        raise ValueError("horizon must be at least 1 step")
    if not 0 < interval < 1:
        raise ValueError("interval must be between 0 and 1")
    times = series.time_of(len(series)) + series.step_s * np.arange(horizon)
    fitted, note = fit_model(series, model)
    if fitted is None:
        empty = np.zeros(0)
        return Forecast(empty, empty, empty, empty, None, note, series.step_s, interval), None
    p, lo, hi = fitted.predict(series.values, horizon, interval)
    return Forecast(times, p, lo, hi, fitted.model, note, series.step_s, interval, fitted.fit_s), fitted


def fit_model(series: Series, wanted: str = "auto") -> tuple[Fitted | None, str]:
    """Choose (`choose_model`) and fit a model on the whole series, falling back when
    Prophet is missing or fails. (None, why) when there is no history."""
    name, note = choose_model(series, wanted)
    if name is None:
        return None, note
    return _fit_with_fallback(name, note, series)


def _fit_with_fallback(
    name: str, note: str, series: Series, lo: int = 0, hi: int | None = None, cache: dict | None = None
) -> tuple[Fitted, str]:
    hi = len(series) if hi is None else hi
    key = ("prophet", lo, hi)
    if cache is not None and name in ("prophet", "prophet-ar") and key in cache:
        return cache[key].variant(name == "prophet-ar"), note
    try:
        fitted = fit(name, series, lo, hi)
        if cache is not None and isinstance(fitted, _Prophet):
            cache[key] = fitted
        return fitted, note
    except ImportError:
        why = "Prophet is not installed (pip install prophet)"
    except Exception as exc:  # Stan failures and the like: never fail the forecast
        why = f"Prophet failed ({type(exc).__name__}: {exc})"
    fallback = "seasonal-naive" if (hi - lo) * series.step_s >= DAY else "mean"
    return fit(fallback, series, lo, hi), f"{why}: falling back to {fallback}"


# --- backtests ---------------------------------------------------------------------------------
@dataclass
class ModelSkill:
    mase: float
    smape: float
    coverage: float  # share of actual values inside the band
    fit_s: float  # mean seconds per fit
    fits: int
    origins: int
    band_scale: float = 1.0  # calibration factor from every origin's misses (what a forecast now would use)
    raw_coverage: float = math.nan  # coverage of the uncalibrated in-sample band

    def to_dict(self) -> dict[str, Any]:
        clean = lambda x: None if x is None or not math.isfinite(x) else round(float(x), 4)  # noqa: E731
        return {
            "mase": clean(self.mase),
            "smape": clean(self.smape),
            "coverage": clean(self.coverage),
            "fit_s": clean(self.fit_s),
            "fits": self.fits,
            "origins": self.origins,
            "band_scale": clean(self.band_scale),
            "raw_coverage": clean(self.raw_coverage),
        }


@dataclass
class BacktestResult:
    horizon: int
    step_s: float
    origins: list[int]
    train: int | None
    refit_every: int
    models: dict[str, ModelSkill] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "horizon_steps": self.horizon,
            "step_s": self.step_s,
            "origins": len(self.origins),
            "train_steps": self.train,
            "refit_every_steps": self.refit_every,
            "models": {k: v.to_dict() for k, v in self.models.items()},
            "notes": dict(self.notes),
        }


def backtest(
    series: Series,
    horizon: int,
    models: Sequence[str] = ("prophet-ar", "prophet", "seasonal-naive", "last-value"),
    *,
    origins: Sequence[int] | None = None,
    first_origin: int | None = None,
    every: int | None = None,
    train: int | None = None,
    refit_every: int | None = None,
    interval: float = DEFAULT_INTERVAL,
    fits_cache: dict | None = None,
    calibrate: bool = True,
) -> BacktestResult:
    """Rolling-origin evaluation: at each origin o, every model forecasts buckets
    [o, o + horizon) from the values before o, and is scored against what happened.

    Origins: `origins`, or every `every` steps (default: `horizon`) from `first_origin`
    (default: half the series) to the last origin with a full horizon after it. Each model is
    fitted on the `train` steps before its fit point (None: all before it) and refitted every
    `refit_every` steps (default: every origin); an origin between refits uses the latest fit
    at or before it, with the data up to the origin (as a cached live forecaster would).
    MASE is scaled per origin by the in-sample seasonal-naive MAE (lag one day) of the
    training window, then averaged over origins; sMAPE likewise. ``prophet`` and
    ``prophet-ar`` share their Prophet fits (and share them across calls given `fits_cache`).

    Bands are calibrated online (`calibrate`): at each origin the in-sample band is scaled by
    `band_scale` of the scores of earlier origins whose outcome was known by then, so
    `coverage` is what a live forecaster would have achieved; `raw_coverage` is the
    uncalibrated band's."""
    n = len(series)
    if horizon < 1:
        raise ValueError("horizon must be at least 1 step")
    if origins is None:
        every = every or horizon
        start = n // 2 if first_origin is None else first_origin
        origins = list(range(start, n - horizon + 1, every))
    origins = sorted(int(o) for o in origins if 0 < o <= n - horizon)
    refit_every = refit_every or 1
    season = season_steps(series.step_s)
    y = series.values
    res = BacktestResult(horizon, series.step_s, list(origins), train, refit_every)
    if not origins:
        res.notes["all"] = "not enough history for one origin with a full horizon after it"
        return res
    first = origins[0]
    cache = {} if fits_cache is None else fits_cache
    for name in models:
        fits: dict[int, Fitted] = {}
        m_mase, m_smape, covered, raw_covered, total, fit_times = [], [], 0, 0, 0, []
        scored: list[tuple[int, np.ndarray]] = []  # (when the outcome is known, scores)
        for o in origins:
            f = first + ((o - first) // refit_every) * refit_every
            if f not in fits:
                lo = 0 if train is None else max(0, f - train)
                fitted, note = _fit_with_fallback(name, "", series, lo, f, cache)
                if note:
                    res.notes[name] = note
                fits.clear()  # only the latest fit is used from now on
                fits[f] = fitted
                fit_times.append(fitted.fit_s)
            fitted = fits[f]
            known = [sc for ready, sc in scored if ready <= o]
            scale = band_scale(np.concatenate(known), interval) if (calibrate and known) else 1.0
            p, lower, upper = fitted.predict(y[:o], horizon, interval, scale)
            _, raw_lower, raw_upper = fitted.predict(y[:o], horizon, interval)
            actual = y[o : o + horizon]
            tr = y[(0 if train is None else max(0, o - train)) : o]
            m_mase.append(mase(actual, p, tr, season))
            m_smape.append(smape(actual, p))
            ok = ~np.isnan(actual)
            covered += _inside(actual[ok], lower[ok], upper[ok])
            raw_covered += _inside(actual[ok], raw_lower[ok], raw_upper[ok])
            total += int(ok.sum())
            scored.append((o + horizon, fitted.band_scores(p, actual, interval)))
        all_scores = np.concatenate([sc for _, sc in scored]) if scored else np.zeros(0)
        res.models[name] = ModelSkill(
            mase=_nanmean(m_mase),
            smape=_nanmean(m_smape),
            coverage=covered / total if total else math.nan,
            fit_s=float(np.mean(fit_times)) if fit_times else 0.0,
            fits=len(fit_times),
            origins=len(origins),
            band_scale=band_scale(all_scores, interval) if calibrate else 1.0,
            raw_coverage=raw_covered / total if total else math.nan,
        )
    return res


def _inside(actual: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> int:
    return int(np.count_nonzero((actual >= lower - 1e-9) & (actual <= upper + 1e-9)))


def _nanmean(xs: Sequence[float]) -> float:
    a = np.asarray(xs, dtype=float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if len(a) else math.nan


# --- what the REST API returns ----------------------------------------------------------------------
def forecast_report(
    series: Series,
    horizon: int,
    model: str = "auto",
    interval: float = DEFAULT_INTERVAL,
    max_history_s: float = 28 * DAY,
    skill_origins: int = 3,
) -> dict[str, Any]:
    """The forecast plus its skill on this same history: a rolling-origin backtest over the
    last `skill_origins` horizons (each model fitted on what came before each origin) of the
    model used against the seasonal-naive and last-value baselines. Times are epoch seconds."""
    series = series.tail(max_history_s)
    fc, fitted = _forecast(series, horizon, model, interval)
    out = fc.to_dict()
    out["skill"] = None
    out["history_points"] = series.observed
    if fc.model is None:
        return out
    n = len(series)
    origins = [n - horizon * j for j in range(skill_origins, 0, -1)]
    first = origins[0]
    # only backtest where the model used now would also have been used at the first origin
    name_then, _ = choose_model(Series(series.start, series.step_s, series.values[:first]), fc.model) if first > 0 else (None, "")
    if first <= 0 or name_then != fc.model:
        out["note"] += "; skill not shown yet: the history is too short to backtest this model"
        return out
    models = [fc.model] + [b for b in BASELINES if b != fc.model]
    bt = backtest(series, horizon, models, origins=origins, interval=interval)
    out["skill"] = bt.to_dict()
    scale = bt.models[fc.model].band_scale
    if fitted is not None and scale != 1.0:  # the band, calibrated on this history's own misses
        _, lower, upper = fitted.predict(series.values, horizon, interval, scale)
        out["lower"] = [round(float(x), 3) for x in lower]
        out["upper"] = [round(float(x), 3) for x in upper]
    out["band_scale"] = round(scale, 3)
    scores = {k: v.mase for k, v in bt.models.items() if math.isfinite(v.mase)}
    if fc.model in scores:
        best = min(scores, key=lambda k: (scores[k], k != fc.model))
        if best != fc.model:
            out["note"] += (
                f"; on this history {best} backtested better (MASE {scores[best]:.2f} vs {scores[fc.model]:.2f}):"
                " read the band, not just the line"
            )
    return out


def skill_summary(skill: Mapping[str, Any] | None) -> str:
    """One line for people: 'MASE 0.81 (seasonal-naive 1.00, last-value 0.95) over 3 origins'."""
    if not skill:
        return ""
    models = skill["models"]
    names = list(models)
    fmt = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
    head = f"MASE {fmt(models[names[0]]['mase'])}"
    rest = ", ".join(f"{n} {fmt(models[n]['mase'])}" for n in names[1:])
    return f"{head} ({rest}) over {skill['origins']} backtest origins"
