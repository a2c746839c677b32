"""What a replay returns: one record per job and the run's totals and time series."""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field

from ..core.cost import PriceList
from ..core.model import Priority

__all__ = ["JobRecord", "SimResult"]


@dataclass(slots=True)
class JobRecord:
    id: str
    tenant: str
    priority: Priority
    gpus: int
    submit: float
    duration: float  # runtime alone on its GPUs (the trace's)
    status: str  # what the trace says: ok / failed / cancelled
    preemptible: bool = False
    gpu_fraction: float | None = None
    state: str = "pending"  # SUCCEEDED FAILED CANCELLED REJECTED, or QUEUED/RUNNING if the run stopped early
    reason: str = ""
    first_start: float | None = None
    end: float | None = None
    attempts: int = 0
    preemptions: int = 0  # by the scheduler (reclaim, priority)
    interruptions: int = 0  # by spot reclaims
    run_gpu_s: float = 0.0  # GPU-seconds held while running, all attempts
    lost_gpu_s: float = 0.0  # work thrown away by preemptions and interruptions
    overhead_gpu_s: float = 0.0  # checkpoint writes and restores
    cost: float = 0.0  # GPU-seconds held x the price of the pool they were on

    @property
    def wait(self) -> float | None:
        return None if self.first_start is None else self.first_start - self.submit

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass(slots=True)
class SimResult:
    policy: str
    jobs: list[JobRecord]
    start: float  # first submit
    end: float  # last job end (or where the run stopped)
    provisioned_gpu_s: float
    allocated_gpu_s: float
    busy_gpu_s: float | None  # GPU share really used, where the trace says (gpu_fraction)
    cost_by_pool: dict[str, float]
    provisioned_by_pool: dict[str, float]
    capacity_max: int
    capacity_initial: int
    interruptions: int
    scale_decisions: int
    scheduler_passes: int
    events: dict[str, int]
    transitions: int
    wall_s: float
    stuck: bool
    spot_pools: tuple[str, ...] = ()
    prices: PriceList = field(default_factory=PriceList)  # what cost_by_pool and JobRecord.cost were billed at
    series_t: array = field(default_factory=lambda: array("d"))
    series_alloc: array = field(default_factory=lambda: array("d"))
    series_capacity: array = field(default_factory=lambda: array("d"))
    series_queued: array = field(default_factory=lambda: array("d"))

    @property
    def event_count(self) -> int:
        return sum(self.events.values())

    @property
    def events_per_s(self) -> float:
        return self.event_count / self.wall_s if self.wall_s > 0 else math.inf
