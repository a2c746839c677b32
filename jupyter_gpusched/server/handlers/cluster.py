"""The cluster as users see it: queues vs quota, nodes, usage history, who am I, metrics."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..base import GPUSchedHandler, api_errors
from ..metrics import render_metrics, render_scaling_metrics
from ..serialize import iso


class QueuesHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        self.finish({"policy": self.service.scheduler.policy.name, "queues": self.service.queues()})


class MeHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """Who the scheduler takes the caller for: name, admin, the tenants they may charge."""
        allowed = self.user_tenants()
        tenants = sorted(self.service.scheduler.ledger.tenants) if allowed is None else allowed
        default = allowed[0] if allowed else self.service.tenant_for(self.user_name, None)
        self.finish({"name": self.user_name, "admin": self.is_admin, "tenants": tenants, "default_tenant": default})


class UsageHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """Per-minute GPUs requested and allocated per tenant (what the forecaster learns from)."""
        minutes = self._int_arg("minutes", 24 * 60, 1, 60 * 24 * 90)
        usage = self.service.usage(minutes, self.get_query_argument("tenant", None))
        hours = self.service.gpu_hours_by_tenant()
        tenant = self.get_query_argument("tenant", None)
        self.finish(
            {
                "minutes": [iso(m) for m in usage["minutes"]],
                "tenants": usage["tenants"],
                "gpu_hours": {t: v for t, v in hours.items() if tenant is None or t == tenant},
            }
        )


class ClusterHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        cluster = self.service.cluster()
        if not self.is_admin:  # others' job ids are not yours to see
            mine = {j.id for j in self.service.jobs(owner=self.user_name)}
            for node in cluster["nodes"]:
                node["jobs"] = [j for j in node["jobs"] if j in mine]
        self.finish(cluster)


class MetricsHandler(GPUSchedHandler):
    """An API handler, so a scraper without a token gets 403, not a login page."""

    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        self.require_admin("/gpusched/metrics")

        text = render_metrics(self.service)
        try:
            text += render_scaling_metrics(await self.service.advisor.recommendation())
        except Exception:  # a failed forecast must not cost the scraper every other metric
            self.log.exception("gpusched: no pool-size recommendation for /gpusched/metrics")
        self.finish(text, set_content_type="text/plain; version=0.0.4; charset=utf-8")
