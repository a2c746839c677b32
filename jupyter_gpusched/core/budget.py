"""Budgets and showback: what tenants and users spent, per period, and what a budget allows.

Pure: the driver hands in events and the time. Accounting counts only GPUs actually held
(from a job's ADMITTED event to the event that ends its attempt), priced per pool with
core/cost.py. Periods (day / week / month, a reset day, a timezone) are computed with
zoneinfo, which reads no clock. The live service and the simulator feed the same
`UsageLedger`, and hand the scheduler the tenants over budget (`Scheduler.set_budgets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .cost import SECONDS_PER_HOUR, PriceList
from .model import Event, JobState

__all__ = [
    "PERIODS",
    "UNITS",
    "WARN_LEVELS",
    "Budget",
    "BudgetStatus",
    "Held",
    "UsageLedger",
    "parse_budget",
    "tenant_budgets",
    "period_bounds",
    "budget_status",
    "over_budget",
]

UNITS = ("gpu_hours", "money")
PERIODS = ("day", "week", "month")
ENFORCE = ("soft", "hard")
WARN_LEVELS = (80, 100)  # percent of the budget at which a warning is recorded, once a period


@dataclass(frozen=True, slots=True)
class Budget:
    limit: float
    unit: str = "gpu_hours"  # or "money" (in the pools' price unit)
    period: str = "month"
    reset_day: int = 1  # month: day of the month (1-28); week: 1 = Monday .. 7 = Sunday; day: unused
    timezone: str = "UTC"
    enforce: str = "soft"  # soft: lowest class, no borrowing; hard: new jobs wait


def parse_budget(where: str, terms: object) -> Budget:
    """A budget from config (`{"gpu_hours": 500, "period": "month", ...}`); ValueError naming
    `where` and the bad key otherwise."""
    if not isinstance(terms, Mapping):
        raise ValueError(f"{where}: a budget is a dict like {{'gpu_hours': 500, 'period': 'month'}}")
    known = set(UNITS) | {"period", "reset_day", "timezone", "enforce"}
    if unknown := sorted(set(terms) - known):
        raise ValueError(f"{where}: unknown budget key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    units = [u for u in UNITS if u in terms]
    if len(units) != 1:
        raise ValueError(f"{where}: give exactly one of gpu_hours or money")
    limit = terms[units[0]]
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit >= 0:
        raise ValueError(f"{where}.{units[0]}: must be a number of 0 or more, not {limit!r}")
    period = terms.get("period", "month")
    if period not in PERIODS:
        raise ValueError(f"{where}.period: {period!r} is not one of {', '.join(PERIODS)}")
    reset_day = terms.get("reset_day", 1)
    top = {"month": 28, "week": 7, "day": 1}[period]
    if isinstance(reset_day, bool) or not isinstance(reset_day, int) or not 1 <= reset_day <= top:
        raise ValueError(f"{where}.reset_day: for a {period} budget a whole number from 1 to {top}, not {reset_day!r}")
    tz = terms.get("timezone", "UTC")
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{where}.timezone: unknown time zone {tz!r} (an IANA name like 'Europe/Berlin')") from None
    enforce = terms.get("enforce", "soft")
    if enforce not in ENFORCE:
        raise ValueError(f"{where}.enforce: {enforce!r} is not one of soft, hard")
    return Budget(float(limit), units[0], period, reset_day, str(tz), enforce)


def tenant_budgets(tenants: Mapping[str, object], where: str = "c.GPUSched.tenants") -> dict[str, Budget]:
    """{tenant: Budget} from the tenants setting (each tenant's optional "budget" key)."""
    out = {}
    for name, terms in sorted(tenants.items()):
        if isinstance(terms, Mapping) and terms.get("budget") is not None:
            out[name] = parse_budget(f"{where}[{name!r}]['budget']", terms["budget"])
    return out


def period_bounds(budget: Budget, now: float) -> tuple[float, float, str]:
    """(start, end, label) of the budget period holding `now`, in epoch seconds."""
    tz = ZoneInfo(budget.timezone)
    local = datetime.fromtimestamp(now, tz)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if budget.period == "day":
        start, end = midnight, midnight + timedelta(days=1)
        label = start.strftime("%Y-%m-%d")
    elif budget.period == "week":
        back = (local.isoweekday() - budget.reset_day) % 7
        start = midnight - timedelta(days=back)
        end = start + timedelta(days=7)
        label = start.strftime("week of %Y-%m-%d")
    else:
        start = midnight.replace(day=budget.reset_day)
        if local.day < budget.reset_day:
            start = _add_months(start, -1)
        end = _add_months(start, 1)
        label = start.strftime("%Y-%m") if budget.reset_day == 1 else start.strftime("month from %Y-%m-%d")
    # Rebuild from wall-clock fields: a DST change inside the period must not shift midnight.
    start = start.replace(tzinfo=tz)
    end = end.replace(tzinfo=tz)
    return start.timestamp(), end.timestamp(), label


def _add_months(d: datetime, n: int) -> datetime:
    y, m = divmod(d.month - 1 + n, 12)
    return d.replace(year=d.year + y, month=m + 1)


@dataclass(frozen=True, slots=True)
class Held:
    """One attempt of a job holding GPUs: from `start` to `end` (None: still holding)."""

    job_id: str
    tenant: str
    owner: str
    gpus: int
    pool: str
    start: float
    end: float | None = None

    def gpu_s(self, since: float, until: float, now: float) -> float:
        """GPU-seconds held within [since, until), counted up to `now` while still held."""
        end = now if self.end is None else self.end
        return max(0.0, min(end, until) - max(self.start, since)) * self.gpus


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    tenant: str
    used: float
    limit: float
    unit: str
    period: str  # label
    period_start: float
    period_end: float
    timezone: str
    enforce: str

    @property
    def fraction(self) -> float:
        return self.used / self.limit if self.limit > 0 else (1.0 if self.used > 0 else 0.0)

    @property
    def state(self) -> str:
        f = self.fraction
        return "over" if self.limit <= self.used or f >= 1 else ("warning" if f >= 0.8 else "ok")

    def level(self) -> int:
        """The highest warning level reached (0, 80 or 100)."""
        return max((lvl for lvl in WARN_LEVELS if self.fraction * 100 >= lvl), default=0)

    def why(self) -> str:
        """Why a hard-budget tenant's new jobs wait."""
        ends = datetime.fromtimestamp(self.period_end, ZoneInfo(self.timezone)).strftime("%Y-%m-%d %H:%M")
        return (
            f"tenant {self.tenant} is over its {self.unit} budget for {self.period} "
            f"({_fmt(self.used)}/{_fmt(self.limit)}); waits until {ends} {self.timezone} or an admin raises it"
        )

    def as_dict(self) -> dict:
        return {
            "used": round(self.used, 4),
            "budget": self.limit,
            "unit": self.unit,
            "period": self.period,
            "period_end": self.period_end,
            "state": self.state,
            "enforce": self.enforce,
        }


def _fmt(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.005 or x >= 100 else f"{x:.2f}"


def budget_status(tenant: str, budget: Budget, ledger: UsageLedger, now: float) -> BudgetStatus:
    start, end, label = period_bounds(budget, now)
    gpu_s, cost = ledger.tenant_spent(tenant, start, now)
    used = gpu_s / SECONDS_PER_HOUR if budget.unit == "gpu_hours" else cost
    return BudgetStatus(tenant, used, budget.limit, budget.unit, label, start, end, budget.timezone, budget.enforce)


class UsageLedger:
    """Held intervals built from events, fed incrementally (`add` each new event once).

    `tenant_spent` is what a scheduling pass asks: it keeps, per tenant, the sum of the
    intervals closed within the current period, so a pass costs O(open attempts), not a
    scan of the history; `rows` serves reports."""

    def __init__(self, prices: PriceList):
        self.prices = prices
        self.held: list[Held] = []
        self._open: dict[str, int] = {}  # job id -> index of its open interval in `held`
        self._closed: dict[str, tuple[float, float, float]] = {}  # tenant -> (period start, gpu-s, cost)

    def add(self, event: Event, tenant: str, owner: str, gpus: int, pool: str | None) -> None:
        """Feed one event of a job (in time order). `pool` is where the attempt runs, read
        when it is admitted."""
        if event.dst is JobState.ADMITTED and event.job_id not in self._open:
            self._open[event.job_id] = len(self.held)
            self.held.append(Held(event.job_id, tenant, owner, gpus, pool or "", event.time))
        elif not event.dst.holds_gpus and event.job_id in self._open:
            i = self._open.pop(event.job_id)
            h = self.held[i]
            closed = self.held[i] = Held(h.job_id, h.tenant, h.owner, h.gpus, h.pool, h.start, event.time)
            cache = self._closed.get(h.tenant)
            if cache is not None:
                since, gpu_s, cost = cache
                got = closed.gpu_s(since, float("inf"), event.time)
                self._closed[h.tenant] = (since, gpu_s + got, cost + self.prices.cost(h.pool, got))

    def tenant_spent(self, tenant: str, since: float, now: float) -> tuple[float, float]:
        """(GPU-seconds, cost) of `tenant` from `since` to `now`."""
        cache = self._closed.get(tenant)
        if cache is None or cache[0] != since:  # a new period (or first ask): one scan of the history
            gpu_s = cost = 0.0
            for h in self.held:
                if h.tenant == tenant and h.end is not None:
                    got = h.gpu_s(since, float("inf"), now)
                    gpu_s += got
                    cost += self.prices.cost(h.pool, got)
            cache = self._closed[tenant] = (since, gpu_s, cost)
        _, gpu_s, cost = cache
        for i in self._open.values():
            h = self.held[i]
            if h.tenant == tenant:
                got = h.gpu_s(since, now, now)
                gpu_s += got
                cost += self.prices.cost(h.pool, got)
        return gpu_s, cost

    def rows(self, since: float, until: float, now: float, by: str, owner: str | None = None) -> list[dict]:
        """Showback rows for [since, until) grouped `by` tenant, user or job: GPU-hours, cost,
        the spot part and what spot saved against on-demand prices. `owner`: that user's jobs only."""
        key = {"tenant": lambda h: h.tenant, "user": lambda h: h.owner, "job": lambda h: h.job_id}[by]
        ref = self.prices.ondemand_reference()
        out: dict[str, dict] = {}
        for h in self.held:
            got = h.gpu_s(since, until, now)
            if got <= 0 or (owner is not None and h.owner != owner):
                continue
            row = out.setdefault(
                key(h),
                {
                    by: key(h),
                    "tenant": h.tenant,
                    "jobs": set(),
                    "gpu_s": 0.0,
                    "cost": 0.0,
                    "spot_gpu_s": 0.0,
                    "saved": 0.0,
                },
            )
            if by == "user" and row["tenant"] != h.tenant:
                row["tenant"] = ""  # a user spending for several tenants
            row["jobs"].add(h.job_id)
            row["gpu_s"] += got
            cost = self.prices.cost(h.pool, got)
            row["cost"] += cost
            if h.pool in self.prices.spot:
                row["spot_gpu_s"] += got
                row["saved"] += max(0.0, got * ref / SECONDS_PER_HOUR - cost)
        return [
            {
                by: name,
                **({} if by == "tenant" else {"tenant": r["tenant"]}),
                "jobs": len(r["jobs"]),
                "gpu_hours": round(r["gpu_s"] / SECONDS_PER_HOUR, 4),
                "cost": round(r["cost"], 4),
                "spot_gpu_hours": round(r["spot_gpu_s"] / SECONDS_PER_HOUR, 4),
                "spot_savings": round(r["saved"], 4),
            }
            for name, r in sorted(out.items())
        ]


def over_budget(statuses: Iterable[BudgetStatus]) -> dict[str, str]:
    """{tenant: enforce} for the tenants at or past their budget: what `Scheduler.set_budgets` takes."""
    return {s.tenant: s.enforce for s in statuses if s.state == "over"}
