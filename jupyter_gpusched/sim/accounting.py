"""Accounting of a replay: each job's attempts (work done, kept, lost; GPU time and money)
and the cluster's GPU-seconds and pool costs over time. Prices come from `core.cost`.

Job model. A job needs `work` seconds on its GPUs. An attempt that resumes from a checkpoint
first spends `restore` reading it; a job that checkpoints writes one every `interval` seconds
of work, pausing `ckpt_cost` each time. A stopped attempt keeps the work up to its last
completed checkpoint and loses the rest (all of it if it does not checkpoint).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from ..core.cost import PriceList
from ..core.model import JobSpec
from .results import JobRecord

__all__ = ["JobRun", "Meter"]


class JobRun:
    """Engine-side state of one job: its progress and its current attempt."""

    __slots__ = (
        "rec",
        "spec",
        "work",
        "saved",
        "token",
        "t_start",
        "restore",
        "interval",
        "ckpt_cost",
        "n_ckpt",
        "pool",
        "running",
        "checkpoints",
    )

    def __init__(self, rec: JobRecord, spec: JobSpec, work: float):
        self.rec = rec
        self.spec = spec
        self.work = work  # seconds of work in all (inf: runs until cancelled)
        self.saved = 0.0  # work kept by the last checkpoint
        self.token = 0  # bumps at every start and stop: stale events are ignored
        self.t_start = 0.0
        self.restore = 0.0
        self.interval: float | None = None
        self.ckpt_cost = 0.0
        self.n_ckpt = 0  # checkpoints this attempt will write
        self.pool = ""  # the pool this attempt runs on (its price is billed)
        self.running = False
        self.checkpoints = 0  # completed this attempt

    def begin(self, t: float, pool: str, restore_s: float, interval: float | None, ckpt_cost_s: float) -> float:
        """Start an attempt at `t` on `pool`; returns when it will finish (inf: never by itself)."""
        rec = self.rec
        rec.attempts += 1
        if rec.first_start is None:
            rec.first_start = t
        self.running = True
        self.t_start = t
        self.token += 1
        self.checkpoints = 0
        self.pool = pool
        self.restore = restore_s if self.saved > 0 else 0.0
        remaining = self.work - self.saved
        if interval is not None and math.isfinite(remaining):
            self.interval = interval
            self.ckpt_cost = ckpt_cost_s
            self.n_ckpt = max(0, math.ceil(remaining / interval - 1e-9) - 1)
        else:
            self.interval = None
            self.ckpt_cost = 0.0
            self.n_ckpt = 0
        if not math.isfinite(remaining):
            return math.inf
        return t + self.restore + remaining + self.n_ckpt * self.ckpt_cost

    def first_checkpoint(self) -> float | None:
        """When this attempt writes its first checkpoint, if it writes any."""
        if not self.n_ckpt or self.interval is None:
            return None
        return self.t_start + self.restore + self.interval + self.ckpt_cost

    def stop(self, t: float, completed: bool, prices: PriceList) -> float:
        """Account the attempt that ends at `t` (GPU time held, its cost, work kept, work
        lost); returns the GPU-seconds it held (0 when none was running)."""
        if not self.running:
            return 0.0
        rec = self.rec
        g = rec.gpus
        held = max(0.0, t - self.t_start)
        rec.run_gpu_s += held * g
        rec.cost += prices.cost(self.pool, held * g)
        self.running = False
        self.token += 1
        if completed:
            rec.overhead_gpu_s += (self.restore + self.n_ckpt * self.ckpt_cost) * g
            self.saved = self.work
            return held * g
        if held <= self.restore:
            rec.overhead_gpu_s += held * g
            return held * g
        computed = held - self.restore
        done = 0
        if self.interval is not None:
            cycle = self.interval + self.ckpt_cost
            done = min(self.n_ckpt, int(computed // cycle))
        kept = done * (self.interval or 0.0)
        overhead = self.restore + done * self.ckpt_cost
        rest = computed - done * ((self.interval or 0.0) + self.ckpt_cost)
        if self.interval is not None and rest > self.interval:  # stopped while writing a checkpoint
            overhead += rest - self.interval
            rest = self.interval
        self.saved += kept
        if math.isfinite(self.work):
            rec.lost_gpu_s += rest * g
        rec.overhead_gpu_s += overhead * g
        return held * g


class Meter:
    """GPU-seconds allocated and provisioned, and what each pool costs while its GPUs are up,
    integrated between the instants the engine visits."""

    __slots__ = (
        "pool_gpus",
        "prov_by_pool",
        "cost_by_pool",
        "alloc_gpu_s",
        "prov_gpu_s",
        "busy_gpu_s",
        "t_last",
        "_rate",
    )

    def __init__(self, pools: Iterable[str], prices: PriceList):
        pools = list(pools)
        self.pool_gpus = {p: 0 for p in pools}  # GPUs up in each pool now
        self.prov_by_pool = {p: 0.0 for p in pools}
        self.cost_by_pool = {p: 0.0 for p in pools}
        self.alloc_gpu_s = 0.0
        self.prov_gpu_s = 0.0
        self.busy_gpu_s = 0.0  # the share really used, where the trace says (gpu_fraction)
        self.t_last = 0.0
        self._rate = {p: prices.rate(p) for p in pools}  # per GPU-second, looked up on every step

    def advance(self, t: float, total_gpus: int, free_gpus: int) -> None:
        """Integrate up to `t` with the cluster as it has been since the last call."""
        dt = t - self.t_last
        if dt > 0:
            self.alloc_gpu_s += (total_gpus - free_gpus) * dt
            self.prov_gpu_s += total_gpus * dt
            for p, g in self.pool_gpus.items():
                if g:
                    self.prov_by_pool[p] += g * dt
                    self.cost_by_pool[p] += g * dt * self._rate[p]
            self.t_last = t
