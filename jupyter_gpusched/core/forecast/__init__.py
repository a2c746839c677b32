"""GPU-demand forecasting: a model set (the latest demand, the latest demand pulled toward
the week's median, the latest demand pulled toward the week's same hours, ETS and Theta on
statsmodels,
Prophet, the seasonal-naive and last-value baselines, a median ensemble), selected per series
and per horizon by a backtest on the history alone, with rolling-origin evaluations so every
forecast can show its own skill.

Pure: arrays in, arrays out. No I/O of ours, no clock (times are handed in as epoch
seconds); the only wall-clock reads time fits (`fit_s`), which never change a result.
Prophet and statsmodels are imported lazily, inside the fits, so the scheduler core loads
without them. (Prophet's Stan backend writes temporary files while it optimizes.)

Resolution. Demand is recorded per minute; every model works on **10-minute means**
(`DEFAULT_STEP_S`), and each bucket keeps its last sample (`Series.latest`): where demand
stood at its end.

``auto`` (`selection`): hourly origins over the last 6 days of the history, every candidate
fitted on what came before them; the lowest backtest MASE wins, but the default (``revert``
once the window spans a week, else the latest demand held) stays unless a challenger is 5%
better on average and better in two independent outcomes in three (a day ahead, hourly
origins overlap: the outcomes are day-long blocks of them, about five, not 120, and a
one-sided t-test over those few must say so at 5%). The served model's
band is the 10th-90th percentile of its own backtest errors per lead time (split conformal).
Too little history to select (under 6 hours plus the horizon): the latest demand, held.

Modules: `series` (the grid), `models` (the fitted-model interface and the simple models),
`revert` (the latest demand pulled toward the week's median), `timeofday` (toward the
week's same hours), `statistical` (ETS, Theta), `prophet` (the Prophet adapter), `fitting` (a model by name, with
fallbacks), `backtest` (the one evaluation: MASE, sMAPE, coverage, spread origins), `selection`
(`select`, the served `SelectedModel`, `evaluate`), `select` (fallbacks, `fit_model`,
`forecast`), `report` (what the REST API returns). Every name is re-exported here:
`from jupyter_gpusched.core import forecast as fc; fc.evaluate(...)`.
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
