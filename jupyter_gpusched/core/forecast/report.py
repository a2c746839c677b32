"""What the REST API returns: the forecast with its skill on the same history."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .backtest import backtest
from .models import BASELINES, DEFAULT_INTERVAL
from .select import choose_model, forecast_with_fit
from .series import DAY, Series

__all__ = ["forecast_report", "skill_summary"]


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
    fc, fitted = forecast_with_fit(series, horizon, model, interval)
    out = fc.to_dict()
    out["skill"] = None
    out["history_points"] = series.observed
    if fc.model is None:
        return out
    n = len(series)
    origins = [n - horizon * j for j in range(skill_origins, 0, -1)]
    first = origins[0]
    # only backtest where the model used now would also have been used at the first origin
    name_then, _ = (
        choose_model(Series(series.start, series.step_s, series.values[:first]), fc.model) if first > 0 else (None, "")
    )
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
