"""Rolling-origin backtests: error measures (MASE, sMAPE), band coverage and split-conformal
calibration of the bands (`band_scale`).

`backtest` is the one evaluation: `forecast-eval`, benchmarks/forecast_eval.py and the model
selection behind the server's forecast (and the skill it reports) all score through it. By
default its origins are spread evenly over the whole series (`spread_origins`), each model
fitted only on what came before its origin, and it keeps the spread over origins (median and
worst MASE), not just the mean."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .fitting import fit_with_fallback
from .models import DEFAULT_INTERVAL, Fitted
from .series import WEEK, Series, season_steps

__all__ = [
    "DEFAULT_ORIGINS",
    "BacktestResult",
    "Fitter",
    "ModelSkill",
    "backtest",
    "band_scale",
    "mase",
    "mase_scale",
    "origin_errors",
    "smape",
    "spread_origins",
]

DEFAULT_ORIGINS = 50
# (model, series, lo, hi, fits cache) -> (the model fitted on values[lo:hi], a note or "")
Fitter = Callable[[str, Series, int, int, dict], tuple[Fitted, str]]


def spread_origins(n: int, horizon: int, first: int, count: int = DEFAULT_ORIGINS) -> list[int]:
    """`count` forecast origins spread evenly from `first` to the last origin with a full
    horizon after it (fewer when the span has fewer steps)."""
    last = n - horizon
    if last < max(first, 1):
        return []
    return sorted({int(round(x)) for x in np.linspace(max(first, 1), last, count)})


def mase_scale(train: np.ndarray, season: int) -> float:
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
    s = mase_scale(train, season)
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
    mase_median: float = math.nan  # the spread of MASE over origins
    mase_worst: float = math.nan
    per_origin: np.ndarray = field(default_factory=lambda: np.zeros(0))  # MASE at each origin

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
            "mase_median": clean(self.mase_median),
            "mase_worst": clean(self.mase_worst),
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
    # with keep=True: every model's forecasts (origins x horizon), what happened, and each
    # origin's MASE scale, so combinations can be scored without refitting
    points: dict[str, np.ndarray] = field(default_factory=dict)
    actual: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    scales: np.ndarray = field(default_factory=lambda: np.zeros(0))

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
    count: int = DEFAULT_ORIGINS,
    train: int | None = None,
    refit_every: int | None = None,
    interval: float = DEFAULT_INTERVAL,
    fits_cache: dict | None = None,
    calibrate: bool = True,
    keep: bool = False,
    fitter: Fitter | None = None,
    scale_lo: int | None = None,
    point_only: bool = False,
) -> BacktestResult:
    """Rolling-origin evaluation: at each origin o, every model forecasts buckets
    [o, o + horizon) from the values before o, and is scored against what happened.

    Origins: `origins`; or every `every` steps from `first_origin` to the last origin with a
    full horizon after it; or (the default) `count` origins spread evenly over that span
    (`spread_origins`; `first_origin` defaults to a week, or half the series if shorter). Each model is
    fitted on the `train` steps before its fit point (None: all before it) and refitted every
    `refit_every` steps (default: every origin); an origin between refits uses the latest fit
    at or before it, with the data up to the origin (as a cached live forecaster would).
    MASE: each origin's mean absolute error over one scale, the in-sample seasonal-naive MAE
    (lag one day) of the series (from `scale_lo`) up to the last origin; the model's MASE is the
    mean over origins, and the median and worst origin show the spread. sMAPE per origin, averaged. ``prophet`` and
    ``prophet-ar`` share their Prophet fits (and share them across calls given `fits_cache`).
    `fitter` fits a model by name (default `fit_with_fallback`); the selection passes one that
    also knows ``auto``, the served model. `point_only` scores the point forecasts alone (no
    sMAPE, no bands): what the selection needs, at a fraction of the cost.

    Bands are calibrated online (`calibrate`): at each origin the in-sample band is scaled by
    `band_scale` of the scores of earlier origins whose outcome was known by then, so
    `coverage` is what a live forecaster would have achieved; `raw_coverage` is the
    uncalibrated band's."""
    n = len(series)
    if horizon < 1:
        raise ValueError("horizon must be at least 1 step")
    if origins is None:
        start = min(int(WEEK / series.step_s), n // 2) if first_origin is None else first_origin
        if every:
            origins = list(range(start, n - horizon + 1, every))
        else:
            origins = spread_origins(n, horizon, start, count)
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
    fit_one = fitter or (lambda name, s, lo, hi, c: fit_with_fallback(name, "", s, lo, hi, c))
    # one MASE scale for the whole backtest: the in-sample seasonal-naive MAE of the series up to
    # the last origin (from `scale_lo`). A scale per origin from its own window made a quiet
    # window's tiny scale outweigh every other origin (a perfect 0 or a MASE in the hundreds).
    scales = np.full(len(origins), mase_scale(y[(scale_lo or 0) : origins[-1]], season))
    if keep:
        res.actual = np.stack([y[o : o + horizon] for o in origins])
        res.scales = scales
    for name in models:
        fits: dict[int, Fitted] = {}
        m_mase: list[float] = []
        m_smape: list[float] = []
        fit_times: list[float] = []
        covered = raw_covered = total = 0
        kept: list[np.ndarray] = []
        scored: list[tuple[int, np.ndarray]] = []  # (when the outcome is known, scores)
        for o in origins:
            f = first + ((o - first) // refit_every) * refit_every
            if f not in fits:
                lo = 0 if train is None else max(0, f - train)
                fitted, note = fit_one(name, series, lo, f, cache)
                if note:
                    res.notes[name] = note
                fits.clear()  # only the latest fit is used from now on
                fits[f] = fitted
                fit_times.append(fitted.fit_s)
            fitted = fits[f]
            actual = y[o : o + horizon]
            if point_only:
                p, _, _ = fitted.predict(y[:o], horizon, None)
                m_mase.append(_scaled_mae(actual, p, scales[len(m_mase)]))
                kept.append(p)
                continue
            known = [sc for ready, sc in scored if ready <= o] if calibrate else []
            scale = band_scale(np.concatenate(known), interval) if known else 1.0
            p, lower, upper = fitted.predict(y[:o], horizon, interval, scale)
            raw_lower, raw_upper = (lower, upper) if scale == 1.0 else fitted.predict(y[:o], horizon, interval)[1:]
            m_mase.append(_scaled_mae(actual, p, scales[len(m_mase)]))
            if keep:
                kept.append(p)
            m_smape.append(smape(actual, p))
            ok = ~np.isnan(actual)
            covered += _inside(actual[ok], lower[ok], upper[ok])
            raw_covered += _inside(actual[ok], raw_lower[ok], raw_upper[ok])
            total += int(ok.sum())
            if calibrate:
                scored.append((o + horizon, fitted.band_scores(p, actual, interval)))
        all_scores = np.concatenate([sc for _, sc in scored]) if scored else np.zeros(0)
        if keep or point_only:
            res.points[name] = np.stack(kept)
        per_origin = np.asarray(m_mase, dtype=float)
        finite = per_origin[np.isfinite(per_origin)]
        res.models[name] = ModelSkill(
            mase=_nanmean(m_mase),
            mase_median=float(np.median(finite)) if len(finite) else math.nan,
            mase_worst=float(finite.max()) if len(finite) else math.nan,
            per_origin=per_origin,
            smape=_nanmean(m_smape),
            coverage=covered / total if total else math.nan,
            fit_s=float(np.mean(fit_times)) if fit_times else 0.0,
            fits=len(fit_times),
            origins=len(origins),
            band_scale=band_scale(all_scores, interval) if calibrate else 1.0,
            raw_coverage=raw_covered / total if total else math.nan,
        )
    return res


def origin_errors(actual: np.ndarray, points: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """The scaled mean absolute error at each origin (rows of `actual` and `points`, as a
    `backtest` with `keep` returns them); NaN at an origin with no observed outcome."""
    return np.array([_scaled_mae(a, p, s) for a, p, s in zip(actual, points, scales, strict=True)], dtype=float)


def _scaled_mae(actual: np.ndarray, pred: np.ndarray, scale: float) -> float:
    ok = ~np.isnan(actual)
    if not ok.any() or not scale > 0:
        return math.nan
    return float(np.mean(np.abs(actual[ok] - pred[ok])) / scale)


def _inside(actual: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> int:
    return int(np.count_nonzero((actual >= lower - 1e-9) & (actual <= upper + 1e-9)))


def _nanmean(xs: Sequence[float]) -> float:
    a = np.asarray(xs, dtype=float)
    a = a[np.isfinite(a)]
    return float(a.mean()) if len(a) else math.nan
