"""Discrete-event replay of a trace through the core `Scheduler`, on a virtual clock.

The engine plays the part of the live service's backend and clock, nothing more: it
submits jobs when the trace says they arrive, runs one scheduling pass after each instant
at which something changed, starts what the scheduler admits (`started`), reports ends
(`finished`, `cancel`), checkpoints (`checkpointed`), spot interruptions (`node_lost`) and
replacement capacity (`add_node`). Every decision comes from the core and its policy;
the engine never decides anything itself.

Job model (accounting.py). A job needs `duration` seconds of work on its GPUs; an attempt
that resumes from a checkpoint first reads it, a job that checkpoints pauses to write one
every interval. A preempted or interrupted job keeps the work up to its last completed
checkpoint and loses the rest, so an interrupted checkpointing job loses at most one
interval. GPU time and money are billed at the pools' prices (core.cost).

Spot model. A spot pool's nodes each live for a time drawn from the pool's lifetime
distribution (seeded per node, so every policy sees the same interruptions on the same
pools); an interrupted node is replaced by a fresh one `replace_after_s` later.
"""

from __future__ import annotations

import heapq
import math
import random
import time as _time
from array import array
from collections.abc import Callable, Mapping, Sequence

from ..core.budget import Budget, UsageLedger, budget_status, over_budget
from ..core.cost import PriceList
from ..core.estimates import QueuedEstimates, RuntimeHistory
from ..core.model import Admit, JobSpec, JobState, NodeSpec, Preempt, Scale
from ..core.placement import Cluster
from ..core.policies import Policy, make_policy
from ..core.scheduler import Scheduler, SchedulerConfig, SpecError
from .accounting import JobRun, Meter
from .config import ESTIMATES, CheckpointModel, Lifetime, PoolConfig, SimJob
from .results import JobRecord, SimResult

# The configuration and result types live in config.py and results.py; they are re-exported
# here for `from jupyter_gpusched.sim.engine import ...`.
__all__ = [
    "CheckpointModel",
    "JobRecord",
    "Lifetime",
    "PoolConfig",
    "SimJob",
    "SimResult",
    "Simulation",
    "simulate",
]

# event kinds, in the order they are handled within one instant
_FINISH, _NODE_LOST, _NODE_ADD, _CHECKPOINT, _ARRIVE, _CANCEL, _WAKEUP = range(7)
KIND_NAMES = ("finish", "node_lost", "node_add", "checkpoint", "arrival", "cancel", "wakeup")


# --- the engine ----------------------------------------------------------------------------------
class Simulation:
    """Replay `jobs` on `pools` with `policy`. Deterministic for a given `seed`."""

    def __init__(
        self,
        jobs: Sequence[SimJob],
        pools: Sequence[PoolConfig],
        tenants: Sequence = (),
        policy: str | Policy = "dynamic",
        *,
        seed: int = 0,
        config: SchedulerConfig | None = None,
        checkpoint: CheckpointModel | None = None,
        estimates: str = "none",
        progress: Callable[[int], None] | None = None,
        check_invariants: bool = False,
        record_series: bool = True,
        max_passes_per_instant: int = 4,
        budgets: Mapping[str, Budget] | None = None,
    ):
        if estimates not in ESTIMATES:
            raise ValueError("estimates must be none, exact, trace or learned")
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.policy_name = self.policy.name or type(self.policy).__name__
        self.pools = {p.name: p for p in pools}
        if len(self.pools) != len(pools):
            raise ValueError("pool names must be unique")
        nodes = [n for p in pools for n in p.nodes]
        names = [n.name for n in nodes]
        if len(set(names)) != len(names):
            raise ValueError("node names must be unique across pools")
        for p in pools:
            for n in p.nodes:
                if n.pool != p.name:
                    raise ValueError(f"node {n.name!r} says pool {n.pool!r} but is listed in {p.name!r}")
        self.cluster = Cluster(nodes, [p.pool for p in pools])
        self.prices = PriceList.of(p.pool for p in pools)
        self.scheduler = Scheduler(self.cluster, tenants, self.policy, config)
        # Budgets (core/budget.py), as the live service enforces them: spending fed from the events.
        self.budgets = dict(budgets or {})
        self.spending = UsageLedger(self.prices)
        self.seed = seed
        self.checkpoint = checkpoint or CheckpointModel()
        # The oracle alone is told true durations (or a scenario where users give estimates).
        self.oracle = self.policy.oracle
        self.estimates = estimates
        # `learned`: a queued job's estimate comes from the jobs finished so far (core/estimates.py), never its own run
        learned = estimates == "learned" and not self.oracle
        self.learned = QueuedEstimates(RuntimeHistory(), self.scheduler.set_learned_runtime) if learned else None
        self.jobs = list(jobs)
        self.progress = progress
        self.check = check_invariants
        self.record_series = record_series
        self.max_passes = max_passes_per_instant
        self._ran = False

    # --- setup ---------------------------------------------------------------------------
    def _spec(self, sj: SimJob) -> JobSpec:
        tj = sj.trace
        est = None
        if self.oracle or self.estimates == "exact":
            est = tj.duration if tj.status != "cancelled" else None
        elif self.estimates == "trace":
            est = tj.est_runtime
        ck = self.checkpoint
        interval = None
        if ck.interval_s is not None and tj.status != "cancelled" and (ck.applies_to == "all" or sj.preemptible):
            interval = ck.interval_s
        return JobSpec(
            notebook=tj.id,
            gpus=tj.gpus,
            priority=sj.priority,
            tenant=tj.tenant,
            preemptible=sj.preemptible,
            est_runtime=est,
            checkpoint_interval=interval,
            max_retries=0,
        )

    def _push(self, t: float, kind: int, a, b=0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, kind, self._seq, a, b))

    # --- run -----------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Replay the whole trace (once: a Simulation holds one scheduler's state)."""
        if self._ran:
            raise RuntimeError("a Simulation runs once; make a new one to replay again")
        self._ran = True
        wall0 = _time.perf_counter()
        s = self.scheduler
        cl = self.cluster
        self._heap: list = []
        self._seq = 0
        self._runs: dict[str, JobRun] = {}
        self._node_seq: dict[str, int] = {}
        self._pending_adds: dict[str, int] = {p: 0 for p in self.pools}
        self._target: dict[str, int] = {p: len(c.nodes) for p, c in self.pools.items()}  # nodes wanted
        self._live: dict[str, int] = {p: 0 for p in self.pools}
        self._interruptions = 0
        self._scales = 0
        self._transitions = 0
        self._passes = 0
        self._events = [0] * len(KIND_NAMES)
        self._meter = meter = Meter(self.pools, self.prices)
        self._node_gpus: dict[str, int] = {}
        self._next_wakeup = math.inf
        self._series = (array("d"), array("d"), array("d"), array("d"))

        records: list[JobRecord] = []
        for sj in sorted(self.jobs, key=lambda j: j.trace.submit):
            tj = sj.trace
            rec = JobRecord(
                tj.id,
                tj.tenant,
                sj.priority,
                tj.gpus,
                tj.submit,
                tj.duration,
                tj.status,
                sj.preemptible,
                tj.gpu_fraction,
            )
            records.append(rec)
            work = math.inf if tj.status == "cancelled" else tj.duration
            if tj.id in self._runs:
                raise ValueError(f"duplicate job id {tj.id!r} in the trace")
            self._runs[tj.id] = JobRun(rec, self._spec(sj), work)
            self._push(tj.submit, _ARRIVE, tj.id)
            if tj.status == "cancelled":
                self._push(tj.submit + tj.duration, _CANCEL, tj.id)
        self._open = len(records)  # jobs not yet ended
        self._to_arrive = len(records)
        t0 = records[0].submit if records else 0.0
        self._now = t0
        meter.t_last = t0
        for pc in self.pools.values():
            for n in pc.nodes:
                self._node_added(n, t0, initial=True)
        self._capacity_initial = cl.total_gpus
        self._capacity_max = cl.total_gpus
        self._ended = 0
        stuck = False

        heap = self._heap
        handlers = (
            self._on_finish,
            self._on_node_lost,
            self._on_node_add,
            self._on_checkpoint,
            self._on_arrive,
            self._on_cancel,
            self._on_wakeup,
        )
        events = self._events
        progress = self.progress
        reported = 0
        while heap and self._open > 0:
            t = heap[0][0]
            meter.advance(t, cl.total_gpus, cl.free_gpus)
            self._now = t
            changed = False
            while heap and heap[0][0] == t:
                _, kind, _, a, b = heapq.heappop(heap)
                events[kind] += 1
                if handlers[kind](a, b, t):
                    changed = True
            if changed:
                self._pass(t)
                if (
                    not s.active
                    and s.queue
                    and self._open > 0
                    and not self._arrivals_pending(t)
                    and not any(self._pending_adds.values())
                ):
                    stuck = True  # nothing runs, nothing arrives, nothing will change
                    break
            if progress is not None and self._ended - reported >= 500:
                progress(self._ended - reported)
                reported = self._ended
        if progress is not None and self._ended > reported:
            progress(self._ended - reported)
        end = self._now
        for rec in records:
            if rec.state == "pending":
                job = s.jobs.get(rec.id)
                rec.state = job.state.value if job is not None else "NOT_SUBMITTED"
        return SimResult(
            policy=self.policy_name,
            jobs=records,
            start=t0,
            end=end,
            provisioned_gpu_s=meter.prov_gpu_s,
            allocated_gpu_s=meter.alloc_gpu_s,
            busy_gpu_s=meter.busy_gpu_s if any(r.gpu_fraction is not None for r in records) else None,
            cost_by_pool=dict(meter.cost_by_pool),
            provisioned_by_pool=dict(meter.prov_by_pool),
            capacity_max=self._capacity_max,
            capacity_initial=self._capacity_initial,
            interruptions=self._interruptions,
            scale_decisions=self._scales,
            scheduler_passes=self._passes,
            events={KIND_NAMES[k]: v for k, v in enumerate(self._events)},
            transitions=self._transitions,
            wall_s=_time.perf_counter() - wall0,
            stuck=stuck,
            spot_pools=tuple(p for p, c in self.pools.items() if c.spot),
            prices=self.prices,
            series_t=self._series[0],
            series_alloc=self._series[1],
            series_capacity=self._series[2],
            series_queued=self._series[3],
        )

    def _arrivals_pending(self, _t: float) -> bool:
        return self._to_arrive > 0 or self._next_wakeup < math.inf

    # --- event handlers (return True when the scheduler should look again) --------------------
    def _on_arrive(self, job_id: str, _b, t: float) -> bool:
        r = self._runs[job_id]
        self._to_arrive -= 1
        try:
            job = self.scheduler.submit(r.spec, t, job_id=job_id)
        except SpecError as exc:
            r.rec.state = "REJECTED"
            r.rec.reason = f"{exc.field}: {exc.message}"
            r.token += 1  # its cancel event, if any, is void
            self._close(r)
            return False
        if self.learned is not None:
            self.learned.track(job)  # its estimate, from the jobs finished so far
        return True

    def _on_finish(self, job_id: str, token: int, t: float) -> bool:
        r = self._runs[job_id]
        if token != r.token:
            return False
        self._stop_attempt(r, t, completed=True)
        ok = r.rec.status != "failed"
        job = self.scheduler.finished(job_id, t, ok=ok)
        if self.learned is not None:
            self.learned.finished(job)  # and queued jobs like it follow
        self._transitions += 1
        r.rec.state = job.state.value
        r.rec.end = t
        self._close(r)
        return True

    def _on_cancel(self, job_id: str, _b, t: float) -> bool:
        r = self._runs[job_id]
        job = self.scheduler.jobs.get(job_id)
        if job is None or job.state.terminal:
            return False
        if r.running:
            self._stop_attempt(r, t, completed=False)
        self.scheduler.cancel(job_id, t, actor="user", reason="withdrawn by its user (trace)")
        r.rec.state = JobState.CANCELLED.value
        r.rec.end = t
        self._close(r)
        return True

    def _on_checkpoint(self, job_id: str, token: int, t: float) -> bool:
        r = self._runs[job_id]
        if token != r.token:
            return False
        r.checkpoints += 1
        self.scheduler.checkpointed(job_id, t)
        if r.checkpoints < r.n_ckpt:
            self._push(t + r.interval + r.ckpt_cost, _CHECKPOINT, job_id, token)  # type: ignore[operator]
        return False

    def _on_node_lost(self, node: str, _b, t: float) -> bool:
        if node not in self.cluster:
            return False  # scaled in already
        pool = self.cluster.pool_of(node)
        hit = self.scheduler.node_lost(node, t, reason=f"spot node {node} reclaimed")
        self._interruptions += 1
        for job in hit:
            r = self._runs[job.id]
            r.rec.interruptions += 1
            self._stopped(r, t)
        self._node_removed(node, pool)
        pc = self.pools[pool]
        if pc.replace_after_s is not None and self._live[pool] + self._pending_adds[pool] < self._target[pool]:
            self._pending_adds[pool] += 1
            self._push(t + pc.replace_after_s, _NODE_ADD, pool)
        return True

    def _on_node_add(self, pool: str, _b, t: float) -> bool:
        self._pending_adds[pool] -= 1
        if self._live[pool] >= self._target[pool]:
            return False  # the pool was scaled in while this node was on its way
        pc = self.pools[pool]
        i = self._node_seq.get(pool, 0)
        self._node_seq[pool] = i + 1
        node = NodeSpec(f"{pool}-new{i}", pc.node_gpus, pool)
        self.scheduler.add_node(node, pc.pool)
        self._node_added(node, t, initial=False)
        return True

    def _on_wakeup(self, _a, _b, t: float) -> bool:
        if t >= self._next_wakeup:
            self._next_wakeup = math.inf
        return True

    # --- nodes -----------------------------------------------------------------------------
    def _node_added(self, node: NodeSpec, t: float, initial: bool) -> None:
        pc = self.pools[node.pool]
        self._meter.pool_gpus[node.pool] += node.gpus
        self._node_gpus[node.name] = node.gpus
        self._live[node.pool] += 1
        if not initial:
            self._capacity_max = max(self._capacity_max, self.cluster.total_gpus)
        if pc.spot and pc.lifetime is not None:
            rng = random.Random(f"{self.seed}:{node.name}")
            self._push(t + pc.lifetime.sample(rng), _NODE_LOST, node.name)

    def _node_removed(self, node: str, pool: str) -> None:
        # the cluster already dropped it; keep the pool's GPU count for billing in step
        self._meter.pool_gpus[pool] -= self._node_gpus.pop(node)
        self._live[pool] -= 1

    # --- scheduling passes -------------------------------------------------------------------
    def _feed_budgets(self, t: float) -> None:
        s = self.scheduler
        events = s.drain_events()
        self._transitions += len(events)
        if not self.budgets:
            return
        for e in events:
            job = s.jobs[e.job_id]
            self.spending.add(e, job.tenant, job.spec.owner, job.gpus, e.pool)
        statuses = [budget_status(name, b, self.spending, t) for name, b in sorted(self.budgets.items())]
        s.set_budgets(over_budget(statuses), {st.tenant: st.why() for st in statuses if st.state == "over"})
        # a pass when the first over-budget period resets, though nothing else happens then
        w = min((st.period_end for st in statuses if st.state == "over"), default=None)
        if w is not None and t < w < self._next_wakeup:
            self._next_wakeup = w
            self._push(w, _WAKEUP, None)

    def _pass(self, t: float) -> None:
        s = self.scheduler
        self._feed_budgets(t)
        for _ in range(self.max_passes):
            decisions = s.schedule(t)
            self._passes += 1
            again = False
            # A pass may admit a job and preempt it again (or the reverse): what the backend
            # does is the net outcome per job, in decision order.
            last: dict[str, Admit | Preempt] = {}
            for d in decisions:
                if isinstance(d, Admit):
                    last[d.job_id] = d
                elif isinstance(d, Preempt):
                    last[d.job_id] = d
                    r = self._runs[d.job_id]
                    if r.running:  # it was running before this pass: stop it now
                        r.rec.preemptions += 1
                        self._stopped(r, t)
                    again = True
                elif isinstance(d, Scale):
                    self._scale(d, t)
            for job_id, d in last.items():
                if isinstance(d, Admit) and s.jobs[job_id].state is JobState.ADMITTED:
                    self._start(s.jobs[job_id].allocation, job_id, t)
            if not again:
                break
        self._feed_budgets(t)
        if self.check:
            self._check_invariants()
        w = self.policy.next_wakeup(s, t)
        if w is not None and t < w < self._next_wakeup:
            self._next_wakeup = w
            self._push(w, _WAKEUP, None)
        if self.record_series:
            cl = self.cluster
            st, sa, sc, sq = self._series
            st.append(t)
            sa.append(cl.total_gpus - cl.free_gpus)
            sc.append(cl.total_gpus)
            sq.append(len(s.queue))

    def _start(self, allocation, job_id: str, t: float) -> None:
        s = self.scheduler
        job = s.started(job_id, t)
        r = self._runs[job_id]
        interval = self.policy.handed_interval(s, job, t)
        ck = self.checkpoint
        end = r.begin(t, self.cluster.pool_of(allocation[0][0]), ck.restore_s, interval, ck.cost_s)
        if math.isfinite(end):
            self._push(end, _FINISH, job_id, r.token)
        first = r.first_checkpoint()
        if first is not None:
            self._push(first, _CHECKPOINT, job_id, r.token)

    def _stop_attempt(self, r: JobRun, t: float, completed: bool) -> None:
        held_gpu_s = r.stop(t, completed, self.prices)
        if r.rec.gpu_fraction is not None:
            self._meter.busy_gpu_s += held_gpu_s * r.rec.gpu_fraction

    def _stopped(self, r: JobRun, t: float) -> None:
        """The job was preempted or its node went away: it is back in the queue."""
        self._stop_attempt(r, t, completed=False)

    def _close(self, r: JobRun) -> None:
        self._open -= 1
        self._ended += 1

    # --- Scale decisions (elastic pools) ----------------------------------------------------------
    def _scale(self, d: Scale, t: float) -> None:
        """Resize a pool to `d.nodes` (within its min/max): new nodes come up `provision_s`
        later; surplus nodes go at once if idle (the policy asks again for busy ones)."""
        pc = self.pools.get(d.pool)
        if pc is None:
            return
        target = max(d.nodes, pc.min_nodes)
        if pc.max_nodes is not None:
            target = min(target, pc.max_nodes)
        self._target[d.pool] = target
        self._scales += 1
        current = self._live[d.pool] + self._pending_adds[d.pool]
        for _ in range(target - current):
            self._pending_adds[d.pool] += 1
            self._push(t + pc.provision_s, _NODE_ADD, d.pool)
        surplus = self._live[d.pool] - target
        if surplus > 0:
            cl, on_node = self.cluster, self.scheduler.on_node
            idle = [n for n in reversed(cl.nodes_in(d.pool)) if not on_node.get(n) and cl.free_on(n) == cl.capacity(n)]
            for n in idle[:surplus]:
                self.scheduler.node_lost(n, t, reason=f"scaled in: {d.reason}", interrupted=False)
                self._node_removed(n, d.pool)

    # --- checks (tests) -----------------------------------------------------------------------
    def _check_invariants(self) -> None:
        s, cl = self.scheduler, self.cluster
        held: dict[str, int] = {}
        for job in s.active.values():
            for node, ids in job.allocation:
                held[node] = held.get(node, 0) + len(ids)
                assert len(set(ids)) == len(ids), f"{job.id} holds a GPU twice"
        for node, n in held.items():
            assert node in cl, f"a job holds GPUs on vanished node {node}"
            assert n <= cl.capacity(node), f"node {node} over-allocated: {n} > {cl.capacity(node)}"
            assert n == cl.capacity(node) - cl.free_on(node), f"node {node}: ledger disagrees with jobs"
        assert sum(held.values()) == cl.total_gpus - cl.free_gpus, "cluster free count disagrees with jobs"
        for jid, r in self._runs.items():
            known = s.jobs.get(jid)
            if known is None:
                continue
            assert r.running == (known.state is JobState.RUNNING), f"{jid}: engine and scheduler disagree"


def simulate(
    jobs: Sequence[SimJob], pools: Sequence[PoolConfig], tenants=(), policy: str | Policy = "dynamic", **kw
) -> SimResult:
    return Simulation(jobs, pools, tenants, policy, **kw).run()
