"""The GPU-demand forecast, its band and its skill, as the service answers it (`Service.forecasts`).

The demand history the service records every minute (`Service.usage`, read from the store)
and the fit both run in a worker thread (`run_in_executor`), so the event loop never waits on
the database or on Prophet. Reports are cached per (tenant, series, horizon, model) until the
next 10-minute bucket begins; concurrent requests for the same forecast share one fit.

Series: `requested` (GPUs queued + running, recorded by the service), `allocated`, or
`gpu_busy` (GPUs busy according to a Prometheus server's DCGM metrics, where one is
configured: `PrometheusSource`). Models: `auto` (selected by backtest for this series and
horizon, core.forecast.selection), `ensemble`, or one of core.forecast.MODELS. Selection plus
fit for one tenant on a week of history takes about a second (benchmarks/forecast_speed.py).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from datetime import datetime, timezone
from typing import Any

import numpy as np

from ..core import forecast as fc
from .errors import InvalidArgument, NotConfigured, NotFound
from .prometheus import PrometheusSource, query_range, tenant_query
from .views import iso

HISTORY_DAYS = 28
MAX_CACHED = 64
STORE_SERIES = ("requested", "allocated")  # recorded by the service itself
PROMETHEUS_SERIES = ("gpu_busy",)  # read from c.GPUSched.prometheus_url


class ForecastCache:
    """Forecasts by key, each valid while its `version` (the current 10-minute bucket) holds."""

    def __init__(self, size: int = MAX_CACHED):
        self.size = size
        self._entries: OrderedDict[tuple, tuple[Any, asyncio.Future]] = OrderedDict()
        self.fits = 0  # how many fits were started (tests read it)

    async def get(self, key: tuple, version: Any, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        hit = self._entries.get(key)
        if hit is not None and hit[0] == version:
            self._entries.move_to_end(key)
            return await asyncio.shield(hit[1])
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, compute)
        self.fits += 1
        self._entries[key] = (version, fut)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        try:
            return await asyncio.shield(fut)
        except Exception:
            if self._entries.get(key, (None, None))[1] is fut:
                del self._entries[key]  # do not cache failures
            raise


def history_series(usage: dict[str, Any], which: str) -> fc.Series:
    """The service's usage history (aligned per-tenant minutes) summed over tenants, as
    10-minute means."""
    minutes = usage["minutes"]
    total = [0.0] * len(minutes)
    for series in usage["tenants"].values():
        for i, v in enumerate(series[which]):
            total[i] += v
    return fc.regularize(minutes, total, fc.DEFAULT_STEP_S)


def prometheus_series(url: str, query: str, end: float) -> fc.Series:
    """The `HISTORY_DAYS` before `end` (a bucket boundary) of `query`, as 10-minute buckets up
    to `end`. A value Prometheus evaluates at t looks back over (t - 10m, t] (the default
    queries' `[10m]`), so it is the bucket that ends at t."""
    step = fc.DEFAULT_STEP_S
    times, values = query_range(url, query, end - HISTORY_DAYS * fc.DAY + step, end, step)
    series = fc.regularize(np.asarray(times) - step, values, step)
    # buckets Prometheus has nothing for at the end stay empty: the forecast still starts at `end`
    missing = int(round((end - series.time_of(len(series))) / step))
    if len(series) and missing > 0:
        series = fc.Series(series.start, step, np.concatenate([series.values, np.full(missing, np.nan)]))
    return series


def build_response(series: fc.Series, horizon_steps: int, model: str) -> dict[str, Any]:
    """Pure: the forecast report with ISO times (runs in a worker thread)."""
    t0 = time.perf_counter()
    rep = fc.forecast_report(series, horizon_steps, model, max_history_s=HISTORY_DAYS * fc.DAY)
    rep["times"] = [iso(t) for t in rep["times"]]
    rep["fitted_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rep["compute_s"] = round(time.perf_counter() - t0, 3)
    return rep


class Forecasts:
    """The service's forecasts: what to fit, where its history comes from, and the cache."""

    def __init__(
        self,
        usage: Callable[[int, str | None], dict[str, Any]],
        clock: Callable[[], float],
        tenants: Callable[[], Collection[str]],
        source: PrometheusSource | None = None,
    ):
        self._usage = usage  # Service.usage: (minutes, tenant) -> aligned per-tenant history
        self._clock = clock
        self._tenants = tenants
        self.source = source or PrometheusSource()
        self.cache = ForecastCache()

    async def report(
        self, *, series: str = "requested", steps: int, model: str = "auto", tenant: str | None = None
    ) -> dict[str, Any]:
        """The forecast of `series` `steps` 10-minute buckets ahead: times, values, lower, upper
        (80% band), model, note, skill, plus the series, its source and the tenant.
        Raises InvalidArgument, NotFound (tenant), NotConfigured or UpstreamError (Prometheus)."""
        if series not in STORE_SERIES + PROMETHEUS_SERIES:
            raise InvalidArgument(f"unknown series {series!r}; use requested, allocated or gpu_busy", "series")
        if model not in (fc.AUTO, fc.ENSEMBLE, *fc.MODELS):
            raise InvalidArgument(
                f"unknown model {model!r}; use auto, ensemble or one of {', '.join(fc.MODELS)}", "model"
            )
        known = self._tenants()
        if tenant is not None and tenant not in known:
            raise NotFound(f"no tenant {tenant!r}; known tenants: {', '.join(sorted(known))}", "tenant")
        if series in PROMETHEUS_SERIES:
            report = await self._prometheus_report(tenant, series, steps, model)
            source = "prometheus"
        else:
            report = await self.store_report(tenant, series, steps, model)
            source = "store"
        return dict(report, series=series, source=source, tenant=tenant)

    def _bucket(self) -> int:
        return int(self._clock() // fc.DEFAULT_STEP_S)  # a forecast is good until the next bucket begins

    async def store_report(self, tenant: str | None, which: str, steps: int, model: str) -> dict[str, Any]:
        """The forecast report of the service's own usage history (cached; fitted off the loop)."""

        def compute() -> dict[str, Any]:  # in a worker thread: the history read and the fit
            usage = self._usage(HISTORY_DAYS * 24 * 60, tenant)
            return build_response(history_series(usage, which), steps, model)

        return await self.cache.get((tenant, which, steps, model), self._bucket(), compute)

    async def _prometheus_report(self, tenant: str | None, which: str, steps: int, model: str) -> dict[str, Any]:
        url, query = self._prometheus_query(tenant)
        bucket = self._bucket()

        def compute() -> dict[str, Any]:  # in a worker thread: the Prometheus query and the fit
            series = prometheus_series(url, query, bucket * fc.DEFAULT_STEP_S)
            report = build_response(series, steps, model)
            if series.observed == 0:
                report["note"] += f"; Prometheus returned no samples for {query!r} in the last {HISTORY_DAYS} days"
            return report

        return await self.cache.get((tenant, which, steps, model), bucket, compute)

    def _prometheus_query(self, tenant: str | None) -> tuple[str, str]:
        """(Prometheus URL, PromQL) for series=gpu_busy, or why it is not configured. `tenant`
        is already checked to be one of the scheduler's tenants (no PromQL from the request)."""
        src = self.source
        if not src.url:
            raise NotConfigured(
                "series gpu_busy reads a Prometheus server's DCGM metrics and none is configured: "
                "set c.GPUSched.prometheus_url (or $GPUSCHED_PROMETHEUS_URL), e.g. http://prometheus:9090",
                "series",
            )
        if tenant is None:
            return src.url, src.query
        if not src.tenant_query:
            raise NotConfigured(
                "per-tenant gpu_busy forecasts need c.GPUSched.prometheus_tenant_query, a PromQL template with "
                '{tenant}, e.g. sum(max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="{tenant}"}[10m]) > bool 0)',
                "tenant",
            )
        return src.url, tenant_query(src.tenant_query, tenant)
