"""``time-of-day``: the latest demand pulled toward where demand has stood at that time of day.

Job arrivals and interactive use follow the clock (quiet nights, busy working hours), and a
count of them is noisy around that shape: the latest bucket says less about tomorrow than the
same hours of the last week do. The forecast for lead k (k = 1..horizon buckets after the
origin, up to a day ahead) is

    now + w[k] * (shape[k] - now)

where ``now`` is the latest sample (as `LatestModel`), ``shape[k]`` the median of the same time
of day as lead k over the `SHAPE_DAYS` days before the origin (`series.daily_shape`), and
``w[k]`` in [0, 1] is fitted per lead time on the training window only, as `revert` fits its
weights (the grid, the origins, the ties to the smaller weight). w = 1 is seasonal-naive made
robust (a week's median, not one day); w = 0 is the latest value. Past a day ahead, and on
buckets of half a day or more, the latest value is held.

A candidate of the selection, not its default. Where demand moves in long steps rather than
with the clock, a strong pull toward the week's hours lands on the wrong level after a step;
the selection serves it only where its backtest beats the default's by a margin and in two
independent outcomes in three (a day ahead, days, and by a t-test over them;
`selection._beats_default`). Measured, it was served mostly on
job-arrival counts (benchmarks/RESULTS.md).

Pure numpy: no clock beyond the fit timer, no I/O.
"""

from __future__ import annotations

import numpy as np

from .revert import RevertModel
from .series import SHAPE_DAYS, daily_shape

__all__ = ["TimeOfDayModel"]


class TimeOfDayModel(RevertModel):
    model = "time-of-day"
    max_weight = 1.0  # all the way to the week's hours
    shape_term = False  # the shape is the target itself

    def _gaps(self, y: np.ndarray, origins: np.ndarray, now: np.ndarray, horizon: int) -> np.ndarray:
        """shape[k] - now for each origin (after bucket i in `origins`) and lead k; 0 past a day
        ahead, where the shape has no value, and on series without a day of buckets."""
        if not self.has_days:
            return np.zeros((len(origins), horizon))
        m = self.season
        leads = np.arange(1, horizon + 1)
        shape = daily_shape(y, m, (int(origins.max()) + 1 if len(origins) else 0) + horizon)
        gap = shape[origins[:, None] + leads[None, :]] - now[:, None]
        gap[:, leads > m] = 0.0
        return np.nan_to_num(gap, nan=0.0)

    def _pull(self, y, idx, now, horizon):
        return self._gaps(y, idx, now[idx], horizon)

    def _pull_from(self, history, now, horizon):
        recent = history[-(SHAPE_DAYS * self.season + 1) :]  # the shape reads the last week only
        return self._gaps(recent, np.array([len(recent) - 1]), np.array([now]), horizon)[0]
