"""Budgets in the live service: accounting fed from the events it writes, enforcement each pass.

The usage ledger (core/budget.py) is rebuilt once from the store when the service starts and
then fed every event the loop persists, so a pass asks it for "spent this period" without
reading the store. Warnings at 80% and 100% are written to the store once per tenant, period
and level (the lab panel and the dashboard show them), and sent to the tenant's notification
targets (c.GPUSched.notify_defaults["tenants"], docs/notifications.md).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from ..core import Event, Scheduler
from ..core.budget import WARN_LEVELS, Budget, BudgetStatus, UsageLedger, budget_status, period_bounds
from ..core.cost import PriceList
from ..store import Store

log = logging.getLogger("jupyter_gpusched")

REPORT_PERIODS = ("day", "week", "month")
REPORT_BY = ("tenant", "user", "job")
REPORT_BUCKETS = ("period", "day")


class Budgets:
    def __init__(self, budgets: Mapping[str, Budget], prices: PriceList, store: Store):
        self.budgets = dict(budgets)
        self.store = store
        self.ledger = UsageLedger(prices)
        self.statuses: dict[str, BudgetStatus] = {}
        # Told of each warning once it is recorded: (tenant, key naming the warning, message).
        self.on_warning: Callable[[str, str, str], None] | None = None

    def load(self) -> None:
        """Rebuild the ledger from the store (once, at start)."""
        for event, tenant, owner, gpus in self.store.held_events():
            self.ledger.add(event, tenant, owner, gpus, event.pool)

    def feed(self, events: Iterable[Event], scheduler: Scheduler) -> None:
        for e in events:
            job = scheduler.jobs.get(e.job_id)
            if job is not None:
                self.ledger.add(e, job.tenant, job.spec.owner, job.gpus, e.pool)

    def enforce(self, scheduler: Scheduler, now: float) -> None:
        """Before a pass: each budget's status, warnings due, and the tenants over budget to the core."""
        if not self.budgets:
            return
        self.statuses = {t: budget_status(t, b, self.ledger, now) for t, b in sorted(self.budgets.items())}
        for st in self.statuses.values():
            for level in WARN_LEVELS:
                if st.level() >= level:
                    self._warn(st, level, now)
        over = {t: st.enforce for t, st in self.statuses.items() if st.state == "over"}
        scheduler.set_budgets(over, {t: st.why() for t, st in self.statuses.items() if st.state == "over"})

    def _warn(self, st: BudgetStatus, level: int, now: float) -> None:
        what = "reached" if level == 100 else f"passed {level}% of"
        message = (
            f"tenant {st.tenant} {what} its {st.unit} budget for {st.period} "
            f"({st.used:.4g}/{st.limit:g}; enforce {st.enforce})"
        )
        if self.store.record_budget_warning(st.tenant, st.period, level, now, message):
            log.warning("jupyter-gpusched: %s", message)
            if self.on_warning is not None:
                self.on_warning(st.tenant, f"{st.tenant}:{st.period}:{level}", message)

    def bar(self, tenant: str) -> dict | None:
        """The budget bar `GET queues` shows for `tenant` (None: it has no budget)."""
        st = self.statuses.get(tenant)
        return None if st is None else st.as_dict()

    def report(
        self,
        period: str,
        by: str,
        now: float,
        user: str | None = None,
        tenant: str | None = None,
        bucket: str = "period",
    ) -> dict:
        """Showback for the current calendar `period` (in the budgets' time zone when they share
        one, else UTC). `user`: only that user's jobs; `tenant`: only that tenant's budget and warnings.
        `bucket="day"` adds `days`: the same rows for each day of the period up to today."""
        zones = {b.timezone for b in self.budgets.values()}
        zone = zones.pop() if len(zones) == 1 else "UTC"
        start, end, label = period_bounds(Budget(0.0, period=period, timezone=zone), now)
        report = {
            "period": label,
            "start": start,
            "end": end,
            "timezone": zone,
            "by": by,
            "rows": self.ledger.rows(start, end, now, by, owner=user),
            "budgets": {t: st.as_dict() for t, st in self.statuses.items() if tenant is None or t == tenant},
            "warnings": self.store.budget_warnings(tenant) if user is None or tenant is not None else [],
        }
        if bucket == "day":
            report["days"] = self._days(start, min(end, now), zone, by, now, user)
        return report

    def _days(self, start: float, until: float, zone: str, by: str, now: float, user: str | None) -> list[dict]:
        """Rows per calendar day (midnight to midnight in `zone`) from `start` to the day holding `until`."""
        days = []
        t = start
        while t <= until:
            day_start, day_end, label = period_bounds(Budget(0.0, period="day", timezone=zone), t)
            rows = self.ledger.rows(day_start, day_end, now, by, owner=user)
            days.append({"day": label, "start": day_start, "rows": rows})
            t = day_end
        return days
