"""What a replay is made of: spot lifetimes, pools, the checkpoint model, and trace jobs with
what the scenario decided for them."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ..core.model import NodeSpec, Pool, Priority
from .traces import TraceJob

__all__ = ["ESTIMATES", "CheckpointModel", "Lifetime", "PoolConfig", "SimJob"]

# `jobs.estimates` in a scenario: what runtime estimates jobs carry (docs/simulator.md). none: none (the
# default); exact: the true durations (users who know); trace: the trace's est_runtime column; learned:
# the 80th percentile of the runtimes of jobs like it finished so far (core/estimates.py), while it is queued.
ESTIMATES: tuple[str, ...] = ("none", "exact", "trace", "learned")


@dataclass(frozen=True, slots=True)
class Lifetime:
    """How long a spot node lives. `distribution`: ``exponential`` (mean `mean_s`, shifted so no
    node lives less than `min_s`), ``weibull`` (`shape`, `scale_s`, plus `min_s`), ``uniform``
    (between `min_s` and `max_s`) or ``fixed`` (`mean_s`). `max_s` caps every draw."""

    distribution: str = "exponential"
    mean_s: float = 8 * 3600.0
    min_s: float = 0.0
    max_s: float | None = None
    shape: float = 1.0
    scale_s: float | None = None

    def __post_init__(self) -> None:
        if self.distribution not in ("exponential", "weibull", "uniform", "fixed"):
            raise ValueError(
                f"unknown lifetime distribution {self.distribution!r}; use exponential, weibull, uniform or fixed"
            )
        if not (self.mean_s > 0 and math.isfinite(self.mean_s)):
            raise ValueError("lifetime mean_s must be a positive number of seconds")
        if self.min_s < 0:
            raise ValueError("lifetime min_s must be 0 or more")
        if self.max_s is not None and self.max_s <= self.min_s:
            raise ValueError("lifetime max_s must be above min_s")
        if self.distribution == "exponential" and self.mean_s <= self.min_s:
            raise ValueError("exponential lifetime: mean_s must be above min_s")
        if self.distribution == "uniform" and self.max_s is None:
            raise ValueError("uniform lifetime needs max_s")
        if self.distribution == "weibull" and not (self.shape > 0):
            raise ValueError("weibull lifetime needs shape > 0")

    def sample(self, rng: random.Random) -> float:
        d = self.distribution
        if d == "fixed":
            x = self.mean_s
        elif d == "uniform":
            x = rng.uniform(self.min_s, self.max_s)  # type: ignore[arg-type]
        elif d == "weibull":
            x = self.min_s + rng.weibullvariate(self.scale_s or self.mean_s, self.shape)
        else:
            x = self.min_s + rng.expovariate(1.0 / (self.mean_s - self.min_s))
        if self.max_s is not None:
            x = min(x, self.max_s)
        return max(x, 1e-3)


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """A pool as the simulator builds it: its starting nodes, price and (for spot) lifetimes.
    `gpus_per_node` is the shape of nodes added later (replacements, scale-out)."""

    name: str
    nodes: tuple[NodeSpec, ...]
    price_per_gpu_hour: float = 0.0
    spot: bool = False
    lifetime: Lifetime | None = None
    replace_after_s: float | None = 600.0  # None: an interrupted spot node is not replaced
    provision_s: float = 300.0  # time to bring up a node a Scale decision asks for
    gpus_per_node: int | None = None
    gpu_type: str | None = None
    min_nodes: int = 0
    max_nodes: int | None = None

    @property
    def pool(self) -> Pool:
        return Pool(
            self.name,
            self.spot,
            self.price_per_gpu_hour,
            self.gpu_type,
            self.min_nodes,
            self.max_nodes,
            self.node_gpus or None,
        )

    @property
    def node_gpus(self) -> int:
        if self.gpus_per_node is not None:
            return self.gpus_per_node
        return max((n.gpus for n in self.nodes), default=0)

    @property
    def gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    @property
    def max_gpus(self) -> int:
        """GPUs when the pool is as large as it may grow (its `max_nodes`)."""
        if self.max_nodes is None or self.max_nodes <= len(self.nodes):
            return self.gpus
        return self.gpus + (self.max_nodes - len(self.nodes)) * self.node_gpus


@dataclass(frozen=True, slots=True)
class CheckpointModel:
    """How jobs checkpoint: every `interval_s` seconds of work (None: they do not), pausing
    `cost_s` to write; `restore_s` to resume. `applies_to`: ``all`` or ``preemptible`` jobs."""

    interval_s: float | None = None
    cost_s: float = 0.0
    restore_s: float = 0.0
    applies_to: str = "all"

    def __post_init__(self) -> None:
        if self.interval_s is not None and not (self.interval_s > 0 and math.isfinite(self.interval_s)):
            raise ValueError("checkpoint interval_s must be a positive number of seconds")
        if self.cost_s < 0 or self.restore_s < 0:
            raise ValueError("checkpoint cost_s and restore_s must be 0 or more")
        if self.applies_to not in ("all", "preemptible"):
            raise ValueError("checkpoint applies_to must be 'all' or 'preemptible'")


@dataclass(frozen=True, slots=True)
class SimJob:
    """A trace job with everything the scenario decided for it (priority, preemptible)."""

    trace: TraceJob
    priority: Priority
    preemptible: bool
