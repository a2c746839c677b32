"""Fitting one named model on a window of a series, falling back to a baseline (and saying
why) when an optional library is missing or a fit fails."""

from __future__ import annotations

import time

from .models import MODELS, Fitted, LastValueModel, LatestModel, MeanModel, SeasonalNaiveModel
from .prophet import ProphetModel
from .revert import RevertModel
from .series import DAY, WEEK, Series, season_steps
from .statistical import EtsModel, ThetaModel
from .timeofday import TimeOfDayModel

__all__ = ["MIN_PROPHET_S", "MIN_WEEKLY_S", "fit", "fit_with_fallback"]

MIN_PROPHET_S = 2 * DAY  # Prophet's daily seasonality needs two cycles
MIN_WEEKLY_S = 2 * WEEK  # weekly seasonality needs two weeks
_SIMPLE = {
    "seasonal-naive": SeasonalNaiveModel,
    "last-value": LastValueModel,
    "latest": LatestModel,
    "revert": RevertModel,
    "time-of-day": TimeOfDayModel,
    "mean": MeanModel,
    "ets": EtsModel,
    "theta": ThetaModel,
}
_LIBRARY = {"prophet": "Prophet", "ets": "statsmodels", "theta": "statsmodels"}


def fit(model: str, series: Series, lo: int = 0, hi: int | None = None) -> Fitted:
    """Fit `model` on `series.values[lo:hi]`. Raises ImportError when its library is missing."""
    hi = len(series) if hi is None else hi
    m = season_steps(series.step_s)
    if model in ("prophet-ar", "prophet"):
        span = (hi - lo) * series.step_s
        return ProphetModel(series, lo, hi, m, anchor=model == "prophet-ar", weekly=span >= MIN_WEEKLY_S)
    cls = _SIMPLE.get(model)
    if cls is None:
        raise ValueError(f"unknown model {model!r}; use one of {', '.join(MODELS)}")
    t0 = time.perf_counter()
    out = cls(series, lo, hi, m)
    out.fit_s = time.perf_counter() - t0
    return out


def fit_with_fallback(
    name: str, note: str, series: Series, lo: int = 0, hi: int | None = None, cache: dict | None = None
) -> tuple[Fitted, str]:
    """`fit` `name` on `series.values[lo:hi]`, falling back to a baseline (and saying why in
    the note) when its library is missing or the fit fails. Fits are shared through `cache`
    (Prophet's between ``prophet`` and ``prophet-ar``)."""
    hi = len(series) if hi is None else hi
    key = ("prophet" if name in ("prophet", "prophet-ar") else name, lo, hi)
    if cache is not None and key in cache:
        hit = cache[key]
        return (hit.variant(name == "prophet-ar") if isinstance(hit, ProphetModel) else hit), note
    try:
        fitted = fit(name, series, lo, hi)
        if cache is not None:
            cache[key] = fitted
        return fitted, note
    except ImportError:
        library = _LIBRARY.get(key[0], key[0])
        why = f"{library} is not installed (pip install {library.lower()})"
    except Exception as exc:  # Stan or optimizer failures and the like: never fail the forecast
        why = f"{name} failed ({type(exc).__name__}: {exc})"
    fallback = "seasonal-naive" if (hi - lo) * series.step_s >= DAY else "mean"
    return fit(fallback, series, lo, hi), f"{why}: falling back to {fallback}"
