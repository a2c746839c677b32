"""`GET <base_url>/gpusched/api/forecast`: the GPU-demand forecast, its band and its skill.

Query: `horizon` (minutes ahead, default 1440), `tenant` (default: all tenants summed),
`series` (`requested`: GPUs queued + running, the default; `allocated`; or `gpu_busy`: GPUs
busy according to a Prometheus server's DCGM metrics, where `c.GPUSched.prometheus_url` is
set), `model` (`auto`, the default: the model selected by backtest on this history for this
horizon; `ensemble`; or one of core.forecast.MODELS). The work (history, selection, fit,
cache) is the service's: `service/forecasting.py`.
"""

from __future__ import annotations

import math

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core import forecast as fc
from ..base import GPUSchedHandler, api_errors


class ForecastHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """GPU demand forecast: times, values, lower, upper (80% band), model, note, skill."""
        horizon = self._int_arg("horizon", 24 * 60, 10, 7 * 24 * 60)
        report = await self.service.forecasts.report(
            series=self.get_query_argument("series", "requested"),
            steps=math.ceil(horizon * 60 / fc.DEFAULT_STEP_S),
            model=self.get_query_argument("model", "auto"),
            tenant=self.get_query_argument("tenant", None) or None,
        )
        tenant = self.get_query_argument("tenant", None) or None
        scheduled = self.service.schedules.known_demand(
            self.service.clock(), horizon * 60.0, fc.DEFAULT_STEP_S, tenant
        )  # known future demand: the recurring schedules' runs (docs/schedules.md)
        self.finish(dict(report, horizon_minutes=horizon, scheduled=scheduled))
