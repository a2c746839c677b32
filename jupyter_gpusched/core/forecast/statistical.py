"""Statistical models from statsmodels: exponential smoothing with a damped trend (``ets``)
and the Theta method (``theta``, simple exponential smoothing with drift).

statsmodels estimates the smoothing parameters once, on the training window; the forecast at
any later origin runs the same recursion over the history up to that origin (what a cached
live forecaster does between refits), so a backtest need not refit at every origin. Missing
buckets are skipped by the recursion (the state is carried forward). statsmodels is imported
inside the fit, so the core loads without it. (Why statsmodels and not statsforecast:
docs/forecasting.md, "Model set".)
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np

from .models import Fitted
from .series import ffill

__all__ = ["EtsModel", "ThetaModel"]


def _filled(y: np.ndarray) -> np.ndarray:
    """NaN replaced by the previous value (the first ones by the first observed value)."""
    ok = ~np.isnan(y)
    if not ok.any():
        return np.zeros_like(y)
    out = ffill(y)
    out[: int(np.flatnonzero(ok)[0])] = y[ok][0]
    return out


class _Smoothing(Fitted):
    """A level (and trend) recursion: `states` holds (level, trend) after each training bucket;
    the state at any later origin continues the recursion over the history after training."""

    initial: tuple[float, float] = (0.0, 0.0)  # the state before the first bucket (set by `_estimate`)

    def __init__(self, series, lo, hi, season):
        super().__init__(series, lo, hi, season)
        t0 = time.perf_counter()
        # statsmodels sets its warnings to "always" when this module is first imported, which would
        # override the filter below if that happened inside it
        import statsmodels.tools.sm_exceptions  # noqa: F401

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence chatter; the parameters are still usable
            self._estimate(_filled(self.train))
        self.states = self._run(self.train, self.initial)
        self.fit_s = time.perf_counter() - t0
        self._after: tuple[int, tuple[float, float]] = (hi, self.states[-1] if len(self.states) else self.initial)

    def _estimate(self, y: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _step(self, level: float, trend: float, y: float) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def ahead(self, level: float, trend: float, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _run(self, y: np.ndarray, state: tuple[float, float]) -> list[tuple[float, float]]:
        out = []
        level, trend = state
        for v in y.tolist():
            level, trend = self._step(level, trend, v)
            out.append((level, trend))
        return out

    def state_at(self, history: np.ndarray) -> tuple[float, float]:
        """The state after `history` (the series up to the origin, which is at or after `hi`)."""
        n = len(history)
        at, state = self._after
        if n < self.hi:
            return self.states[n - self.lo - 1] if n > self.lo else self.initial
        if n < at:
            at, state = self.hi, self.states[-1] if self.states else self.initial
        states = self._run(history[at:n], state)
        if states:
            state = states[-1]
        self._after = (n, state)  # origins move forward in a backtest: continue from here next time
        return state

    def point(self, history, horizon):
        level, trend = self.state_at(history)
        return self.ahead(level, trend, horizon)

    def errors(self, horizon):
        """k-step in-sample errors: the forecast from the state after bucket t against t + k."""
        y = self.train
        if len(y) <= horizon + 1:
            return np.full((1, horizon), np.nan)
        lv = np.array([s[0] for s in self.states[:-horizon]])
        tr = np.array([s[1] for s in self.states[:-horizon]])
        pred = lv[:, None] + tr[:, None] * self._trend_weights(horizon)[None, :]
        actual = np.lib.stride_tricks.sliding_window_view(y[1:], horizon)
        return actual - pred

    def _trend_weights(self, horizon: int) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class EtsModel(_Smoothing):
    """Holt's linear method with a damped trend (ETS(A,Ad,N)); level-shift series pick a high
    level weight and a trend that fades, so it stays near the latest demand but follows a ramp."""

    model = "ets"

    def _estimate(self, y):
        from statsmodels.tsa.holtwinters import ExponentialSmoothing

        res = ExponentialSmoothing(y, trend="add", damped_trend=True, initialization_method="estimated").fit()
        p = res.params
        self.alpha = float(p["smoothing_level"])
        self.beta = float(p["smoothing_trend"])
        self.phi = float(p["damping_trend"])
        self.initial = (float(p["initial_level"]), float(p["initial_trend"]))

    def _step(self, level, trend, y):
        base = level + self.phi * trend
        if math.isnan(y):
            return base, self.phi * trend
        new = self.alpha * y + (1 - self.alpha) * base
        return new, self.beta * (new - level) + (1 - self.beta) * self.phi * trend

    def _trend_weights(self, horizon):
        return np.cumsum(self.phi ** np.arange(1, horizon + 1))

    def ahead(self, level, trend, horizon):
        return level + trend * self._trend_weights(horizon)


class ThetaModel(_Smoothing):
    """The Theta method (Assimakopoulos & Nikolopoulos 2000, as Hyndman & Billah 2003 show it:
    simple exponential smoothing plus half the slope of the linear trend)."""

    model = "theta"

    def _estimate(self, y):
        from statsmodels.tsa.forecasting.theta import ThetaModel as _Theta

        res = _Theta(y, period=self.season, deseasonalize=False).fit()
        self.alpha = min(max(float(res.params["alpha"]), 1e-3), 1.0)
        self.drift = 0.5 * float(res.params["b0"])  # theta = 2: half the slope of the linear trend
        self.initial = (float(y[0]), 0.0)

    def _step(self, level, trend, y):
        if math.isnan(y):
            return level, trend
        return self.alpha * y + (1 - self.alpha) * level, trend

    def _trend_weights(self, horizon):
        return np.zeros(horizon)

    def ahead(self, level, trend, horizon):
        return level + self.drift * (np.arange(horizon) + 1 / self.alpha)

    def errors(self, horizon):
        e = super().errors(horizon)
        return e - self.drift * (np.arange(horizon) + 1 / self.alpha)[None, :] if e.shape[1] == horizon else e
