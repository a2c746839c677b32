"""Which model a history allows (fallbacks say why), fitting it, and the forecast itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .fitting import MIN_PROPHET_S, MIN_WEEKLY_S, fit, fit_with_fallback
from .models import DEFAULT_INTERVAL, MODELS, Fitted
from .selection import DEFAULT_SELECT_HORIZON, ENSEMBLE, MIN_FIT_S, fit_selected
from .series import DAY, Series

__all__ = [
    "MIN_PROPHET_S",
    "MIN_WEEKLY_S",
    "Forecast",
    "choose_model",
    "fit",
    "fit_model",
    "fit_with_fallback",
    "forecast",
    "forecast_with_fit",
]


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds < 2 * DAY else f"{seconds / DAY:.1f} days"


def choose_model(series: Series, wanted: str = "auto", horizon: int = DEFAULT_SELECT_HORIZON) -> tuple[str | None, str]:
    """The model to use on this history, and a sentence saying why (fallbacks say so).
    ``auto`` means: selected by backtest (`selection.select`) where the history allows it."""
    span = series.span_s
    if series.observed == 0:
        return None, "no demand history yet: no forecast"
    if wanted not in ("auto", ENSEMBLE, *MODELS):
        raise ValueError(f"unknown model {wanted!r}; use auto, ensemble or one of {', '.join(MODELS)}")
    ok = series.values[~np.isnan(series.values)]
    if wanted == "auto" and float(ok.max() - ok.min()) == 0.0:
        return (
            "mean",
            f"demand has been constant ({ok[0]:g} GPUs) over the {_hours(span)} of history: forecasting that value",
        )
    if wanted in ("auto", ENSEMBLE) and span < MIN_FIT_S + horizon * series.step_s:
        return "latest", (
            f"only {_hours(span)} of history (selecting a model by backtest needs {_hours(MIN_FIT_S)} plus the horizon):"
            " falling back to the latest demand, held"
        )
    if wanted in ("auto", ENSEMBLE):
        return wanted, "selected by backtest"
    if wanted in ("prophet-ar", "prophet") and span < DAY:
        return "mean", f"only {_hours(span)} of history (a seasonal model needs a day): falling back to the mean"
    if wanted in ("prophet-ar", "prophet") and span < MIN_PROPHET_S:
        return "seasonal-naive", (
            f"only {_hours(span)} of history (Prophet needs 2 days): falling back to seasonal-naive (same time yesterday)"
        )
    if wanted == "seasonal-naive" and span < DAY:
        return "mean", f"only {_hours(span)} of history (seasonal-naive needs a day): falling back to the mean"
    if wanted in ("prophet-ar", "prophet"):
        weekly = "daily and weekly" if span >= MIN_WEEKLY_S else "daily (weekly needs 2 weeks of history)"
        anchor = ", anchored on the latest demand (AR(1) on its residuals)" if wanted == "prophet-ar" else ""
        return wanted, f"Prophet with {weekly} seasonality{anchor}, fitted on {_hours(span)} of history"
    return wanted, f"{wanted} forecast as asked, from {_hours(span)} of history"


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
    series: Series,
    horizon: int,
    model: str = "auto",
    interval: float = DEFAULT_INTERVAL,
    max_history_s: float | None = 28 * DAY,
) -> Forecast:
    """Forecast the `horizon` buckets after the end of `series` (the last `max_history_s` of
    it are used). Falls back (and says so) when the history is too short or Prophet fails."""
    if max_history_s is not None:
        series = series.tail(max_history_s)
    return forecast_with_fit(series, horizon, model, interval)[0]


def forecast_with_fit(series: Series, horizon: int, model: str, interval: float) -> tuple[Forecast, Fitted | None]:
    """`forecast` on the whole series, with the fitted model (None without history)."""
    if horizon < 1:
        raise ValueError("horizon must be at least 1 step")
    if not 0 < interval < 1:
        raise ValueError("interval must be between 0 and 1")
    times = series.time_of(len(series)) + series.step_s * np.arange(horizon)
    fitted, note = fit_model(series, model, horizon)
    if fitted is None:
        empty = np.zeros(0)
        return Forecast(empty, empty, empty, empty, None, note, series.step_s, interval), None
    p, lo, hi = fitted.predict(series.values, horizon, interval)
    return Forecast(times, p, lo, hi, fitted.model, note, series.step_s, interval, fitted.fit_s), fitted


def fit_model(series: Series, wanted: str = "auto", horizon: int | None = None) -> tuple[Fitted | None, str]:
    """Choose (`choose_model`) and fit a model on the whole series, falling back when a
    library is missing or a fit fails. (None, why) when there is no history. ``auto`` selects
    by backtest at `horizon` (default 1 hour); a model named with a `horizon` is fitted the same
    way (scored against the baselines, with the band of its own backtest errors)."""
    name, note = choose_model(series, wanted, horizon or DEFAULT_SELECT_HORIZON)
    if name is None:
        return None, note
    steps = horizon or DEFAULT_SELECT_HORIZON
    if name in ("auto", ENSEMBLE):
        fitted, sel = fit_selected(series, 0, len(series), steps, force=None if name == "auto" else ENSEMBLE)
        if fitted is not None and sel is not None:
            return fitted, "; ".join([sel.why, *fitted.notes])
        name, note = "latest", "too little history to select a model by backtest: the latest demand, held"
    cache: dict = {}
    plain, note = fit_with_fallback(name, note, series, cache=cache)
    if horizon is None or name != wanted or plain.model != name:  # a fallback: no backtest of it
        return plain, note
    # a model asked for by name: scored against the baselines, with the band of its backtest errors
    fitted, sel = fit_selected(series, 0, len(series), steps, cache, force=name)
    if fitted is None or sel is None or not sel.forced:
        return plain, note
    return fitted, f"{note}; {sel.why}"
