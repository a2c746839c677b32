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

Modules: `series` (the grid), `models` (the fitted-model interface and the statistical
models), `prophet` (the Prophet adapter), `select` (which model, the fit, the forecast),
`backtest` (skill and calibration), `report` (what the REST API returns). Every name is
re-exported here: `from jupyter_gpusched.core import forecast as fc; fc.backtest(...)`.
"""

from __future__ import annotations

from .backtest import BacktestResult, ModelSkill, backtest, band_scale, mase, smape, spread_origins
from .fitting import MIN_PROPHET_S, MIN_WEEKLY_S, fit
from .models import BASELINES, DEFAULT_INTERVAL, MODELS, Fitted
from .report import forecast_report, skill_summary
from .select import Forecast, choose_model, fit_model, forecast
from .selection import AUTO, CANDIDATES, ENSEMBLE, SelectedModel, Selection, evaluate, select
from .series import DAY, DEFAULT_STEP_S, WEEK, Series, regularize, season_steps

__all__ = [
    "AUTO",
    "CANDIDATES",
    "ENSEMBLE",
    "SelectedModel",
    "Selection",
    "evaluate",
    "select",
    "spread_origins",
    "BASELINES",
    "DAY",
    "DEFAULT_INTERVAL",
    "DEFAULT_STEP_S",
    "MIN_PROPHET_S",
    "MIN_WEEKLY_S",
    "MODELS",
    "WEEK",
    "BacktestResult",
    "Fitted",
    "Forecast",
    "ModelSkill",
    "Series",
    "backtest",
    "band_scale",
    "choose_model",
    "fit",
    "fit_model",
    "forecast",
    "forecast_report",
    "mase",
    "regularize",
    "season_steps",
    "skill_summary",
    "smape",
]
