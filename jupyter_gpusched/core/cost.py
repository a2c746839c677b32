"""Money: the price of each pool and what pools, jobs and tenants cost.

Pure arithmetic on GPU-seconds. A pool's price is per GPU-hour (`Pool.price_per_gpu_hour`);
a pool is on-demand or spot. The same bill is read two ways:
- what **pools** cost: every GPU that is up, busy or idle, x its pool's price (the invoice);
- what **jobs** cost: the GPU-seconds a job held on each pool x that pool's price (what its
  tenant is charged). The difference between the two is the price of idle capacity.

The simulator bills with it (sim/accounting.py); a live driver can bill a job from the
GPU-seconds its attempts held, with the pools the cluster reports.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .model import Pool

__all__ = ["SECONDS_PER_HOUR", "PriceList", "job_cost", "tenant_costs"]

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class PriceList:
    """Price per GPU-hour of each pool, and which pools are spot. A pool not listed is free."""

    per_gpu_hour: Mapping[str, float] = field(default_factory=dict)
    spot: frozenset[str] = frozenset()

    @classmethod
    def of(cls, pools: Iterable[Pool]) -> PriceList:
        pools = list(pools)
        return cls({p.name: p.price_per_gpu_hour for p in pools}, frozenset(p.name for p in pools if p.spot))

    def rate(self, pool: str) -> float:
        """The price of one GPU-second on `pool`."""
        return self.per_gpu_hour.get(pool, 0.0) / SECONDS_PER_HOUR

    def cost(self, pool: str, gpu_s: float) -> float:
        """The price of `gpu_s` GPU-seconds on `pool`."""
        return gpu_s * self.rate(pool)

    def ondemand_reference(self) -> float:
        """What a spot GPU-hour would have cost on demand, for spot savings: the dearest
        on-demand price (0 when there is no on-demand pool)."""
        return max((v for p, v in self.per_gpu_hour.items() if p not in self.spot), default=0.0)

    def spot_part(self, by_pool: Mapping[str, float]) -> float:
        """The part of per-pool amounts (costs, GPU-seconds) that falls on spot pools."""
        return sum(v for p, v in by_pool.items() if p in self.spot)


def job_cost(held: Iterable[tuple[str, float]], prices: PriceList) -> float:
    """What a job costs: (pool, GPU-seconds held) of each of its attempts, in order, priced."""
    total = 0.0
    for pool, gpu_s in held:
        total += prices.cost(pool, gpu_s)
    return total


def tenant_costs(costs: Iterable[tuple[str, float]]) -> dict[str, float]:
    """(tenant, cost) pairs summed per tenant, by tenant name."""
    out: dict[str, float] = defaultdict(float)
    for tenant, c in costs:
        out[tenant] += c
    return dict(sorted(out.items()))
