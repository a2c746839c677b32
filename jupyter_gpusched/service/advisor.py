"""How many nodes each pool should have, from the demand forecast (`Service.advisor`).

The live face of `core.scaling`, the rule the simulator evaluates (benchmarks/scaling_eval.py):
the GPUs wanted are the largest upper edge of the demand forecast over the next
`lead_minutes` (or the demand seen now, if larger), plus `headroom`; a `spot_share` of them
(a number, or ``"auto"``: the preemptible jobs' share of the GPU-hours asked for over the last
week) goes to spot pools; each pool gets whole nodes within its min/max; a pool grows at once
and shrinks only after `cooldown_minutes` since its last change.

The scheduler cannot buy nodes (a cluster autoscaler, Karpenter or a cloud API does), so it
recommends: per pool, the nodes it has and the nodes it should have, and why. Configured by
`c.GPUSched.scaling` (see `parse_scaling`); on by default with no headroom, no spot share and
no node limits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..core import Scheduler
from ..core import forecast as fc
from ..core.scaling import ElasticScaler, PoolSizing, ScalingConfig, advise, pool_sizings
from .forecasting import Forecasts
from .views import iso

SCALING_KEYS = {"lead_minutes", "cooldown_minutes", "headroom", "spot_share", "pools"}
POOL_KEYS = {"min_nodes", "max_nodes", "gpus_per_node"}


@dataclass
class ScalingSettings:
    config: ScalingConfig = field(default_factory=ScalingConfig)
    pools: dict[str, dict[str, int | None]] = field(default_factory=dict)  # per-pool limits


def parse_scaling(raw: dict[str, Any]) -> ScalingSettings:
    """`c.GPUSched.scaling`, checked: {"lead_minutes": 30, "cooldown_minutes": 60,
    "headroom": 0.1, "spot_share": 0.3 (or "auto"), "pools": {name: {"min_nodes", "max_nodes",
    "gpus_per_node"}}}. Raises ValueError saying what is wrong."""
    unknown = set(raw) - SCALING_KEYS
    if unknown:
        raise ValueError(f"c.GPUSched.scaling: unknown keys {sorted(unknown)}; use {sorted(SCALING_KEYS)}")

    def number(key: str, default: float) -> float:
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ValueError(f"c.GPUSched.scaling[{key!r}] must be a number, not {v!r}")
        return float(v)

    share = raw.get("spot_share", 0.0)
    if isinstance(share, str) and share != "auto":
        raise ValueError(f"c.GPUSched.scaling['spot_share'] must be a number between 0 and 1, or 'auto', not {share!r}")
    try:
        config = ScalingConfig(
            lead_s=number("lead_minutes", 30) * 60,
            cooldown_s=number("cooldown_minutes", 60) * 60,
            headroom=number("headroom", 0.0),
            spot_share=None if share == "auto" else number("spot_share", 0.0),
        )
    except ValueError as exc:
        raise ValueError(f"c.GPUSched.scaling: {exc}") from None
    pools: dict[str, dict[str, int | None]] = {}
    for name, terms in (raw.get("pools") or {}).items():
        if not isinstance(terms, dict) or set(terms) - POOL_KEYS:
            raise ValueError(
                f"c.GPUSched.scaling['pools'][{name!r}] must be a dict with keys among {sorted(POOL_KEYS)}"
            )
        limits: dict[str, int | None] = {}
        for key in POOL_KEYS:
            v = terms.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(
                    f"c.GPUSched.scaling['pools'][{name!r}][{key!r}] must be a whole number >= 0, not {v!r}"
                )
            limits[key] = v
        if limits["max_nodes"] is not None and (limits["min_nodes"] or 0) > limits["max_nodes"]:
            raise ValueError(f"c.GPUSched.scaling['pools'][{name!r}]: min_nodes is above max_nodes")
        pools[name] = limits
    return ScalingSettings(config, pools)


def scheduled_gpus(known: dict[str, Any] | None) -> dict[float, int]:
    """Bucket start -> GPUs, summed over tenants, from a `Schedules.known_demand` answer."""
    if not known:
        return {}
    totals = [sum(row[b] for row in known["gpus"].values()) for b in range(len(known["times"]))]
    return {datetime.fromisoformat(t).timestamp(): g for t, g in zip(known["times"], totals, strict=True) if g}


class Advisor:
    """The scaler's memory between requests (what it last recommended per pool, and when)."""

    def __init__(
        self,
        scheduler: Scheduler,
        forecasts: Forecasts,
        clock: Callable[[], float],
        settings: ScalingSettings | None = None,
        elastic: bool = True,
    ):
        self.scheduler = scheduler
        self.forecasts = forecasts
        self.clock = clock
        self.settings = settings or ScalingSettings()
        self.elastic = elastic  # False: a fixed machine, whose pools are never advised to shrink
        self.scaler = ElasticScaler([], self.settings.config)  # remembers what it asked per pool, when and why
        self.last: dict[str, Any] | None = None  # the latest recommendation, for the metrics
        # known future demand (now, horizon_s, step_s) -> Schedules.known_demand: the recurring runs due
        self.known: Callable[[float, float, float], dict[str, Any]] | None = None

    async def recommendation(self) -> dict[str, Any]:
        """The recommendation now (the forecast is cached per 10-minute bucket, fitted off the loop)."""
        steps = max(1, math.ceil(self.settings.config.lead_s / fc.DEFAULT_STEP_S)) + 1  # the bucket under way, too
        report = await self.forecasts.store_report(None, "requested", steps, "auto")
        now = self.clock()
        known = self.known(now, steps * fc.DEFAULT_STEP_S, fc.DEFAULT_STEP_S) if self.known else None
        return self.recommend(report, now, scheduled_gpus(known))

    def sizing(self) -> list[PoolSizing]:
        """Pools as the scheduler sees them now, with the configured limits."""
        return pool_sizings(self.scheduler.cluster, self.settings.pools, self.elastic)

    def recommend(
        self, report: dict[str, Any], now: float, scheduled: dict[float, int] | None = None
    ) -> dict[str, Any]:
        """The recommendation for a forecast `report` (as `Forecasts.report` gives it), as the REST API shows it.
        The arithmetic is the core's (`core.scaling.advise`), the same the simulator's elastic pools use.
        `scheduled` (bucket start -> GPUs the recurring schedules' runs will hold): each bucket's upper edge is
        at least that. Not added to it: a run that recurs is in the history the forecast learnt from, too."""
        cfg = self.settings.config
        self.scaler.set_pools(self.sizing())
        times = [datetime.fromisoformat(t).timestamp() for t in report["times"]]
        scheduled = scheduled or {}
        upper = [max(float(u), scheduled.get(t, 0)) for t, u in zip(times, report["upper"], strict=False)]
        advice = advise(self.scheduler, self.scaler, now, times, upper)
        self.last = {
            "lead_minutes": cfg.lead_s / 60,
            "cooldown_minutes": cfg.cooldown_s / 60,
            "headroom": cfg.headroom,
            "spot_share": round(advice.spot_share, 4),
            "spot_share_source": advice.spot_share_source,
            "demand_gpus": advice.demand_gpus,
            "forecast_peak_gpus": round(advice.forecast_peak_gpus, 3),
            "scheduled_peak_gpus": max((scheduled.get(t, 0) for t in times), default=0),
            "wanted_gpus": round(advice.wanted_gpus, 3),
            "forecast": {
                "model": report.get("model"),
                "note": report.get("note", ""),
            },
            "pools": [dataclasses.asdict(p) for p in advice.pools],
            "decided_at": iso(now),
        }
        return self.last
