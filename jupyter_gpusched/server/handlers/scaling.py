"""`GET <base_url>/gpusched/api/scaling`: how many nodes each pool should have, from the forecast.

The advice is the service's (`service/advisor.py`); the same figures are in /gpusched/metrics
(`gpusched_pool_recommended_nodes`) for whatever acts on them.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..base import GPUSchedHandler, api_errors


class ScalingHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """Recommended pool sizes from the demand forecast (GPUs queued + running, all tenants)."""
        self.finish(await self.service.advisor.recommendation())
