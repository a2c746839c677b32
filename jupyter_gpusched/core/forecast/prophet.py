"""The Prophet adapter: Prophet's seasonal curve, optionally anchored on the latest demand
(an AR(1) on its in-sample residuals). Prophet is imported inside the fit, so the core
loads without it."""

from __future__ import annotations

import math
import time

import numpy as np

from .models import Fitted, last_valid, lead_errors
from .series import DAY

__all__ = ["ProphetModel"]


class ProphetModel(Fitted):
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

    def variant(self, anchor: bool) -> ProphetModel:
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
        last, ago = last_valid(history)
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
        return lead_errors(self.resid, horizon, self.decay(horizon))


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
