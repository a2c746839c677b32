"""Elastic pools: size the on-demand and spot pools from the demand forecast.

Pure, like the rest of the core: times are handed in, decisions (`Scale`) come out.

The rule (`plan`): the GPUs wanted now are the largest upper quantile of the demand
forecast over the next `lead_s` seconds (at least the time a node takes to come up plus
one decision interval), or the demand seen now if that is larger, plus `headroom`. So
capacity is asked for *before* the peak it is meant for. A share `spot_share` of it
(the preemptible part of demand: configured, or learnt by `preemptible_share` from the
GPU-hours the cluster's jobs asked for over the last week) goes to spot pools, the rest
(and whatever spot pools cannot hold) to on-demand pools, so the on-demand pools are sized
to the work that may not run on spot; each pool gets whole nodes within its min/max. A pool
grows at once; it shrinks only when `cooldown_s` has passed since its last change, so
capacity leaves after the peak, not in the dip between two bursts.

`ElasticScaler` keeps the little state the rule needs (last change, size asked and why,
per pool). `advise` is the one place demand is summed and the rule applied to a scheduler's
state: the live service's recommendation (GET api/scaling) and `ElasticPolicy` both call
it. `DemandFeed` turns the demand the driver observes into a forecast (the one
forecaster, `core.forecast`, refitted every `refit_s`). `ElasticPolicy` wraps any
scheduling policy: it schedules as the wrapped policy does and, every `interval_s`,
records demand and adds the scaler's `Scale` decisions. The simulator applies them as it
does any policy's; the live service recommends them (it cannot buy nodes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .model import JobState, Scale
from .policies.base import Policy

if TYPE_CHECKING:  # pragma: no cover
    from .model import Job
    from .placement import Cluster
    from .queues import QueueGroup, QueueKey
    from .scheduler import Scheduler, SchedulerConfig

__all__ = [
    "Advice",
    "DemandFeed",
    "ElasticPolicy",
    "ElasticScaler",
    "PoolAdvice",
    "PoolSizing",
    "ScalingConfig",
    "advise",
    "demand_gpus",
    "needed_gpus",
    "plan",
    "pool_sizings",
    "preemptible_share",
    "target_gpus",
]

SHARE_WINDOW_S = 7 * 86400.0  # a learnt spot share reads the last week of requests


@dataclass(frozen=True, slots=True)
class PoolSizing:
    """What the scaler may do with one pool."""

    name: str
    gpus_per_node: int
    min_nodes: int = 0
    max_nodes: int | None = None
    spot: bool = False

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ValueError(f"pool {self.name}: gpus_per_node must be at least 1")
        if self.min_nodes < 0 or (self.max_nodes is not None and self.max_nodes < self.min_nodes):
            raise ValueError(f"pool {self.name}: need 0 <= min_nodes <= max_nodes")

    @property
    def max_gpus(self) -> float:
        return math.inf if self.max_nodes is None else self.max_nodes * self.gpus_per_node


@dataclass(frozen=True, slots=True)
class ScalingConfig:
    lead_s: float = 1800.0  # look this far ahead: >= node start-up + one decision interval
    cooldown_s: float = 3600.0  # no shrinking a pool within this long of its last change
    headroom: float = 0.0  # extra share on top of the target (0.1 = 10%)
    # share of demand that may run on spot (preemptible work); None: learnt (`preemptible_share`)
    spot_share: float | None = 0.0

    def __post_init__(self) -> None:
        if self.lead_s < 0 or self.cooldown_s < 0 or self.headroom < 0:
            raise ValueError("lead_s, cooldown_s and headroom must be 0 or more")
        if self.spot_share is not None and not 0 <= self.spot_share <= 1:
            raise ValueError("spot_share must be between 0 and 1")


def preemptible_share(jobs: Iterable[Job], now: float, window_s: float = SHARE_WINDOW_S) -> tuple[float, int]:
    """The preemptible jobs' share of the GPU-seconds asked for over [now - window_s, now]:
    each job asks for its GPUs from its submission (its release, for one that waited for
    others) until it ended, or now: queued or running, as the demand the forecast reads.
    (Not a trace's GPU-hours of work: queueing counts.) That share may go to spot; the
    rest needs on-demand GPUs. Returns (share, jobs counted); (0.0, 0) when none asked:
    with nothing learnt, everything stays on demand."""
    since = now - window_s
    asked = {True: 0.0, False: 0.0}
    counted = 0
    for j in jobs:
        if j.state is JobState.WAITING:  # not asking yet: its dependencies have not ended
            continue
        end = now if j.finished_at is None else min(j.finished_at, now)
        held = end - max(j.submitted_at, since)
        if held > 0:
            asked[j.spec.preemptible] += held * j.gpus
            counted += 1
    total = asked[True] + asked[False]
    return (asked[True] / total if total > 0 else 0.0), counted


def target_gpus(
    now: float, times: Sequence[float] | np.ndarray, upper: Sequence[float] | np.ndarray, lead_s: float
) -> float:
    """The largest forecast upper quantile over [now, now + lead_s]. A forecast bucket
    counts if any part of it falls in that span (buckets start at `times`). 0 when the
    forecast says nothing about that span."""
    t = np.asarray(times, dtype=float)
    u = np.asarray(upper, dtype=float)
    if len(t) == 0:
        return 0.0
    step = float(np.median(np.diff(t))) if len(t) > 1 else 0.0
    inside = (t + step > now) & (t <= now + lead_s) & np.isfinite(u)
    return float(u[inside].max()) if inside.any() else 0.0


def plan(
    now: float,
    wanted_gpus: float,
    pools: Sequence[PoolSizing],
    current: Mapping[str, int],
    config: ScalingConfig,
    last_change: Mapping[str, float] | None = None,
    spot_share: float | None = None,
) -> list[Scale]:
    """Scale decisions for pools whose size should change, given the GPUs wanted now
    (already including the look-ahead). `current`: each pool's size (nodes, counting those
    on their way); `last_change`: when each pool last changed size; `spot_share`: the share
    for spot pools, as `advise` resolved it (None: the config's; a learnt one unresolved: none)."""
    last_change = last_change or {}
    need = needed_gpus(wanted_gpus, config)
    spot_pools = [p for p in pools if p.spot]
    od_pools = [p for p in pools if not p.spot]
    share = (config.spot_share if spot_share is None else spot_share) or 0.0
    need_spot = need * share if spot_pools else 0.0
    need_od = need - need_spot
    spot_room = sum(p.max_gpus for p in spot_pools)
    if need_spot > spot_room:
        need_od += need_spot - spot_room
        need_spot = spot_room
    desired: dict[str, int] = {}
    for group, amount in ((od_pools, need_od), (spot_pools, need_spot)):
        left = amount
        for p in group:
            nodes = math.ceil(max(0.0, left) / p.gpus_per_node - 1e-9)
            nodes = max(nodes, p.min_nodes)
            if p.max_nodes is not None:
                nodes = min(nodes, p.max_nodes)
            desired[p.name] = nodes
            left -= nodes * p.gpus_per_node
    out = []
    for p in pools:
        cur = int(current.get(p.name, 0))
        want = desired[p.name]
        if want > cur:
            out.append(Scale(p.name, want, f"forecast: {need:.0f} GPUs wanted within {config.lead_s / 60:.0f} min"))
        elif want < cur:
            since = now - last_change.get(p.name, -math.inf)
            if since >= config.cooldown_s:
                out.append(
                    Scale(
                        p.name,
                        want,
                        f"forecast: {need:.0f} GPUs wanted; shrinking after {config.cooldown_s / 60:.0f} min cool-down",
                    )
                )
    return out


@dataclass
class ElasticScaler:
    """`plan` plus its memory: the size last asked for and when, per pool."""

    pools: Sequence[PoolSizing]
    config: ScalingConfig = field(default_factory=ScalingConfig)
    last_change: dict[str, float] = field(default_factory=dict)
    asked: dict[str, int] = field(default_factory=dict)

    reasons: dict[str, str] = field(default_factory=dict)  # why each pool was last resized
    # the learnt spot share, with (jobs known, 10-minute bucket) when it was counted
    _share: tuple[tuple[int, int], float, int] | None = field(default=None, repr=False, init=False)

    def set_pools(self, pools: Sequence[PoolSizing]) -> None:
        """New limits for the same pools; when pools appeared or went, start afresh (the
        memory is about pools that no longer match)."""
        if [p.name for p in pools] != [p.name for p in self.pools]:
            self.last_change.clear()
            self.asked.clear()
            self.reasons.clear()
        self.pools = pools

    def decide(
        self,
        now: float,
        times: Sequence[float] | np.ndarray,
        upper: Sequence[float] | np.ndarray,
        current: Mapping[str, int],
        demand_now: float = 0.0,
    ) -> list[Scale]:
        """Decisions from a forecast (bucket start times and the upper quantile) and the
        demand seen now. A pool's size is the last size asked for, else `current`."""
        return self.resize(now, max(target_gpus(now, times, upper, self.config.lead_s), demand_now), current)

    def resize(
        self, now: float, wanted_gpus: float, current: Mapping[str, int], spot_share: float | None = None
    ) -> list[Scale]:
        """`plan` for `wanted_gpus` (the look-ahead already in it), remembering what it asked."""
        sizes = {p.name: self.asked.get(p.name, int(current.get(p.name, 0))) for p in self.pools}
        decisions = plan(now, wanted_gpus, self.pools, sizes, self.config, self.last_change, spot_share)
        for d in decisions:
            self.asked[d.pool] = d.nodes
            self.last_change[d.pool] = now
            self.reasons[d.pool] = d.reason
        return decisions

    def learnt_share(self, jobs: Collection[Job], now: float) -> tuple[float, int]:
        """`preemptible_share` of `jobs`, counted again only when a job was added or a new
        10-minute bucket began: it reads every job the scheduler knows, and a week's share
        moves slowly, while the server may be asked for advice many times a minute."""
        key = (len(jobs), int(now // 600))
        if self._share is None or self._share[0] != key:
            self._share = (key, *preemptible_share(jobs, now))
        return self._share[1], self._share[2]

    def recommended(self, pool: str, current: int) -> int:
        """The size last asked for `pool`, else the size it has."""
        return self.asked.get(pool, current)


# --- pool-size advice: one code path for the live service and the simulator ---------------------
def demand_gpus(s: Scheduler) -> int:
    """GPUs wanted now: those of queued jobs plus those of admitted and running ones."""
    return sum(j.gpus for j in s.queue) + sum(j.gpus for j in s.active.values())


def needed_gpus(wanted_gpus: float, config: ScalingConfig) -> float:
    """The GPUs to provide for `wanted_gpus` (forecast peak or demand, the larger): plus headroom."""
    return max(0.0, wanted_gpus) * (1.0 + config.headroom)


def pool_sizings(
    cluster: Cluster, limits: Mapping[str, Mapping[str, int | None]], elastic: bool = True
) -> list[PoolSizing]:
    """The cluster's pools as the scaler sees them, with the configured `limits` per pool
    (`gpus_per_node`, `min_nodes`, `max_nodes`; each may be missing or None). A pool whose node
    size is neither configured nor learnable from a node is left out. Without a configured
    floor, a pool of a fixed machine (`elastic` False) keeps the nodes it has; a cluster's
    pool may empty."""
    out = []
    for name, pool in sorted(cluster.pools.items()):
        lim = limits.get(name, {})
        per_node = lim.get("gpus_per_node") or max((cluster.capacity(n) for n in cluster.nodes_in(name)), default=0)
        if per_node < 1:
            continue
        floor = lim.get("min_nodes")
        if floor is None:
            floor = 0 if elastic else len(cluster.nodes_in(name))
        out.append(PoolSizing(name, per_node, floor, lim.get("max_nodes"), spot=pool.spot))
    return out


@dataclass(frozen=True, slots=True)
class PoolAdvice:
    """One pool's row: its size now and the size it should have (fields in the REST order)."""

    name: str
    spot: bool
    gpus_per_node: int
    nodes: int
    recommended_nodes: int
    min_nodes: int
    max_nodes: int | None
    reason: str  # why it should change; "" when it should not


@dataclass(frozen=True, slots=True)
class Advice:
    """What `advise` found: the demand now, the forecast peak over the lead time, the GPUs
    the pools should hold (the larger of the two, plus headroom), each pool's advice, and the
    scale decisions taken this time."""

    demand_gpus: int
    forecast_peak_gpus: float
    wanted_gpus: float
    pools: tuple[PoolAdvice, ...]
    decisions: tuple[Scale, ...]
    # the share of wanted_gpus meant for spot pools (configured or learnt); without spot pools,
    # or beyond their max_nodes, it goes on demand
    spot_share: float = 0.0
    spot_share_source: str = "configured"  # or how it was learnt


def advise(
    s: Scheduler,
    scaler: ElasticScaler,
    now: float,
    times: Sequence[float] | np.ndarray,
    upper: Sequence[float] | np.ndarray,
    demand: int | None = None,
) -> Advice:
    """Size `scaler.pools` for the demand on `s` now and the forecast (bucket start `times`
    and `upper` band) over the lead time. The scaler remembers what it asked, so a pool
    shrinks only after the cool-down. `demand`: GPUs wanted now, if already summed."""
    cfg = scaler.config
    demand = demand_gpus(s) if demand is None else demand
    peak = target_gpus(now, times, upper, cfg.lead_s)
    wanted = max(peak, demand)
    current = {p.name: len(s.cluster.nodes_in(p.name)) for p in scaler.pools}
    if cfg.spot_share is None:
        share, counted = scaler.learnt_share(s.jobs.values(), now)
        source = (
            f"learnt: preemptible jobs' share of the GPU-hours {counted} jobs asked for"
            f" over the last {SHARE_WINDOW_S / 86400:.0f} days"
            if counted
            else f"learnt: no job asked for GPUs in the last {SHARE_WINDOW_S / 86400:.0f} days, so all on demand"
        )
    else:
        share, source = cfg.spot_share, "configured"
    decisions = scaler.resize(now, wanted, current, share)
    rows = []
    for p in scaler.pools:
        want = scaler.recommended(p.name, current[p.name])
        reason = scaler.reasons.get(p.name, "") if want != current[p.name] else ""
        rows.append(
            PoolAdvice(p.name, p.spot, p.gpus_per_node, current[p.name], want, p.min_nodes, p.max_nodes, reason)
        )
    return Advice(demand, peak, needed_gpus(wanted, cfg), tuple(rows), tuple(decisions), share, source)


class DemandFeed:
    """Demand history as the driver observes it, and forecasts made from it.

    `observe(t, gpus)` records demand (GPUs queued + running) at time t; `upper(now)`
    returns (bucket start times, upper quantile) for the next `horizon_s`, refitting
    `model` (see core.forecast) every `refit_s` on the last `history_s`. `warmup` is
    history from before the driver started (times, values), if any."""

    def __init__(
        self,
        model: str = "auto",
        horizon_s: float = 6 * 3600.0,
        refit_s: float = 6 * 3600.0,
        history_s: float = 28 * 86400.0,
        interval: float = 0.8,
        step_s: float = 600.0,
        warmup: tuple[Sequence[float], Sequence[float]] | None = None,
    ):
        self.model = model
        self.horizon_s = horizon_s
        self.refit_s = refit_s
        self.history_s = history_s
        self.interval = interval
        self.step_s = step_s
        self.t: list[float] = list(warmup[0]) if warmup else []
        self.v: list[float] = list(warmup[1]) if warmup else []
        self._fitted: Any = None
        self._fit_at = -math.inf
        self.fits = 0
        self.fit_s = 0.0
        self.models_used: dict[str, int] = {}

    def observe(self, t: float, gpus: float) -> None:
        self.t.append(float(t))
        self.v.append(float(gpus))

    def upper(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        from . import forecast as fc

        series = fc.regularize(self.t, self.v, self.step_s).tail(self.history_s)
        horizon = max(1, math.ceil(self.horizon_s / self.step_s))
        if series.observed == 0:
            return np.zeros(0), np.zeros(0)
        if self._fitted is None or now - self._fit_at >= self.refit_s:
            self._fitted, _ = fc.fit_model(series, self.model)
            self._fit_start = series.start
            self._fit_at = now
            self.fits += 1
            self.fit_s += self._fitted.fit_s
            self.models_used[self._fitted.model] = self.models_used.get(self._fitted.model, 0) + 1
        # the fitted model indexes buckets from its own start: give it the history on that grid
        offset = int(round((series.start - self._fit_start) / self.step_s))
        history = series.values
        if offset > 0:
            history = np.concatenate([np.full(offset, np.nan), history])
        elif offset < 0:
            history = history[-offset:]
        _, _, hi = self._fitted.predict(history, horizon, self.interval)
        times = self._fit_start + self.step_s * (len(history) + np.arange(horizon))
        return times, hi


class ElasticPolicy(Policy):
    """Any policy, plus forecast-driven pool sizes. Every `interval_s` it records the
    demand (GPUs queued + running), asks `feed.upper(now)` for the forecast (bucket start
    times, upper quantile) and turns `advise`'s decisions into `Scale` decisions. With
    `feed=None` it sizes from the demand seen now only (a reactive baseline)."""

    def __init__(
        self,
        base: Policy,
        scaler: ElasticScaler,
        feed: DemandFeed | None = None,
        interval_s: float = 600.0,
        on_tick: Callable[[Scheduler, float], None] | None = None,
    ):
        self.base = base
        self.scaler = scaler
        self.feed = feed
        self.interval_s = interval_s
        self.on_tick = on_tick
        self.name = f"{base.name}+{'forecast' if feed is not None else 'reactive'}-scaling"
        self.allow_borrowing = base.allow_borrowing
        self.oracle = base.oracle
        self._next = -math.inf
        self.decisions: list[tuple[float, Scale]] = []
        self.last_advice: Advice | None = None  # the latest `advise` answer

    # Every other hook is the wrapped policy's, delegated explicitly.
    def queue_key(self, config: SchedulerConfig) -> QueueKey:
        return self.base.queue_key(config)

    def queue_group(self) -> QueueGroup | None:
        return self.base.queue_group()

    def checkpoint_interval(self, s: Scheduler, job: Job, now: float) -> float | None:
        return self.base.checkpoint_interval(s, job, now)

    def handed_interval(self, s: Scheduler, job: Job, now: float) -> float | None:
        return self.base.handed_interval(s, job, now)

    def node_leaving(self, s: Scheduler, node: str, now: float, interrupted: bool) -> None:
        self.base.node_leaving(s, node, now, interrupted)

    def max_pool_gpus(self, s: Scheduler, pool: str) -> float:
        return self.base.max_pool_gpus(s, pool)

    def schedule(self, s: Scheduler, now: float) -> None:
        self.base.schedule(s, now)
        if now < self._next:
            return
        self._next = now + self.interval_s
        demand = demand_gpus(s)
        if self.feed is not None:
            self.feed.observe(now, demand)
            times, upper = self.feed.upper(now)
        else:
            times, upper = np.zeros(0), np.zeros(0)
        self.last_advice = advise(s, self.scaler, now, times, upper, demand)
        for d in self.last_advice.decisions:
            s.scale(d.pool, d.nodes, d.reason)
            self.decisions.append((now, d))
        if self.on_tick is not None:
            self.on_tick(s, now)

    def next_wakeup(self, s: Scheduler, now: float) -> float | None:
        w = self.base.next_wakeup(s, now)
        mine = self._next if self._next > now else now + self.interval_s
        return mine if w is None else min(w, mine)
