"""Showback: what tenants, users and jobs spent this period (`GET usage/report`)."""

from __future__ import annotations

import csv
import io

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...service.budgets import REPORT_BUCKETS, REPORT_BY, REPORT_PERIODS
from ..base import GPUSchedHandler, api_errors
from ..validation import ApiError

FORMATS = ("json", "csv")


class UsageReportHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """GPU-hours, cost and spot savings this period, by tenant, user or job. Admins see
        everyone; others see their own jobs (and their tenant's budget)."""
        period = self._choice("period", "month", REPORT_PERIODS)
        by = self._choice("by", "tenant", REPORT_BY)
        fmt = self._choice("format", "json", FORMATS)
        bucket = self._choice("bucket", "period", REPORT_BUCKETS)
        svc = self.service
        if self.is_admin:
            report = svc.budgets.report(period, by, svc.clock(), bucket=bucket)
        else:
            tenant = svc.tenant_for(self.user_name, None)
            report = svc.budgets.report(period, by, svc.clock(), user=self.user_name, tenant=tenant, bucket=bucket)
        if fmt == "json":
            self.finish(report)
            return
        out = io.StringIO()
        columns = [
            by,
            *(["tenant"] if by != "tenant" else []),
            "jobs",
            "gpu_hours",
            "cost",
            "spot_gpu_hours",
            "spot_savings",
        ]
        writer = csv.DictWriter(out, ["period", *columns], lineterminator="\n")
        writer.writeheader()
        # bucket=day: one block of rows per day, its "period" the day
        blocks = (
            [(d["day"], d["rows"]) for d in report["days"]] if bucket == "day" else [(report["period"], report["rows"])]
        )
        for label, rows in blocks:
            for row in rows:
                writer.writerow({"period": label, **row})
        self.set_header("Content-Disposition", f'attachment; filename="gpusched-usage-{period}-by-{by}.csv"')
        self.finish(out.getvalue(), set_content_type="text/csv; charset=utf-8")

    def _choice(self, name: str, default: str, allowed: tuple[str, ...]) -> str:
        value = self.get_query_argument(name, default)
        if value not in allowed:
            raise ApiError(400, "invalid_value", f"{name} must be one of {', '.join(allowed)}, not {value!r}", name)
        return value
