"""What the REST API returns: the forecast with its skill on the same history."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .models import BASELINES, DEFAULT_INTERVAL
from .select import forecast_with_fit
from .selection import SelectedModel
from .series import DAY, Series

__all__ = ["forecast_report", "skill_summary"]


def forecast_report(
    series: Series,
    horizon: int,
    model: str = "auto",
    interval: float = DEFAULT_INTERVAL,
    max_history_s: float = 28 * DAY,
) -> dict[str, Any]:
    """The forecast plus its skill on this same history: the backtest the selection ran on the
    training window (hourly origins over its last days, each model fitted on what came before
    them): the served model's MASE next to the baselines' and the other candidates'. Times
    are epoch seconds. `skill` is None when the history was too short to backtest."""
    series = series.tail(max_history_s)
    fc, fitted = forecast_with_fit(series, horizon, model, interval)
    out = fc.to_dict()
    out["skill"] = None
    out["history_points"] = series.observed
    if not isinstance(fitted, SelectedModel):
        if fc.model is not None:
            out["note"] += "; skill not shown yet: the history is too short to backtest this model"
        return out
    sel = fitted.selection
    order = [sel.model, *BASELINES, *sorted(sel.mase)]
    clean = sel.to_dict()["mase"]
    out["skill"] = {
        "horizon_steps": horizon,
        "step_s": series.step_s,
        "origins": sel.origins,
        "models": {name: {"mase": clean[name]} for name in dict.fromkeys(order) if name in clean},
        "selection": sel.to_dict(),
    }
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
