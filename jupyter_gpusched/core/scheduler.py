"""The scheduler: state, the place where decisions are applied, and the driver-facing API.

Drivers (the live service, the simulator, tests) call `submit`, `schedule`, and report
what happened to jobs (`started`, `finished`, `lost`, `node_lost` ...). Every state change
goes through `model.transition` and lands in `events` for the driver to persist.
The policy decides; `admit` and `preempt` below are the only places decisions take effect.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .dependencies import WHEN_CHOICES
from .lookahead import Lookahead
from .model import (
    ALLOWED_TRANSITIONS,
    Admit,
    Allocation,
    Decision,
    Event,
    IllegalTransition,
    Job,
    JobSpec,
    JobState,
    NodeSpec,
    Pool,
    Preempt,
    Priority,
    Scale,
    Tenant,
    transition,
)
from .placement import Cluster
from .policies import Policy, make_policy
from .queues import JobQueue, starvation_bound
from .quotas import QuotaLedger


class SpecError(ValueError):
    """A job spec that can never run here. `field` names the offending input."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class UnknownJob(KeyError):
    pass


# A day: long beside an aging interval (a job larger than its tenant's quota is its admin's to
# size, rule 7), short beside the weeks such a job would otherwise wait on a loaded cluster.
OVERSIZE_GRANT_AFTER_S = 86400.0
# How long one forward run of `estimate_start` answers while nothing changes: the estimate's
# own precision is much coarser.
LOOKAHEAD_REUSE_S = 60.0


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    aging_interval: float = 3600.0  # seconds a waiting job needs to gain one priority class
    strict_tenants: bool = False  # reject tenants that were not configured
    max_reservations: int = 1  # queued jobs that may hold nodes draining for them (backfill)
    short_first: bool = False  # expected-short jobs get a head start of up to one aging interval
    # dynamic: a job that has not started yet may pause a preemptible run of its own tenant (or a
    # borrower) that has run one aging interval, right after that run's checkpoint
    pause_long_runs: bool = True
    # dynamic: a job larger than its tenant's whole quota that has waited this long (seconds) runs
    # as if within quota, one such job at a time (docs/scheduling.md rule 7); None: never
    oversize_grant_after: float | None = OVERSIZE_GRANT_AFTER_S


class Scheduler:
    def __init__(
        self,
        cluster: Cluster,
        tenants: Iterable[Tenant] = (),
        policy: Policy | str = "dynamic",
        config: SchedulerConfig | None = None,
    ):
        self.cluster = cluster
        self.config = config or SchedulerConfig()
        self.policy = make_policy(policy) if isinstance(policy, str) else policy
        self.ledger = QuotaLedger(tenants, allow_borrowing=self.policy.allow_borrowing)
        self.jobs: dict[str, Job] = {}
        self.queue = JobQueue(self.policy.queue_key(self.config), self.policy.queue_group())
        self.active: dict[str, Job] = {}  # ADMITTED or RUNNING: holding GPUs
        self.borrowers: dict[str, Job] = {}  # active jobs admitted beyond quota
        self.on_node: dict[str, set[str]] = {n: set() for n in cluster.node_names}
        self.events: list[Event] = []
        self._seq = itertools.count()
        self._decisions: list[Decision] = []
        # every change of state counts here, so that `estimate_start` reuses its forward run until one
        self._changes = 0
        self._lookahead: tuple[tuple[int, int], Lookahead] | None = None

    # --- driver API: jobs in -----------------------------------------------------------
    def validate(self, spec: JobSpec) -> None:
        """Raise SpecError if `spec` could never be admitted on this cluster."""
        if not isinstance(spec.gpus, int) or isinstance(spec.gpus, bool) or spec.gpus < 1:
            raise SpecError("gpus", "gpus must be a whole number of at least 1")
        if self.config.strict_tenants and spec.tenant not in self.ledger.tenants:
            known = ", ".join(sorted(self.ledger.tenants)) or "none configured"
            raise SpecError("tenant", f"unknown tenant {spec.tenant!r}; known tenants: {known}")
        groups = self.pool_choices(spec)
        pools = [p for group in groups for p in group]
        if not pools:
            raise SpecError("gpu_type", f"no pool offers GPU type {spec.gpu_type!r}")
        # A job is placed within one pool group (spot or on-demand), never across both; an
        # elastic pool counts at the size the policy may grow it to.
        if (problem := self.cluster.cpus_memory_problem(spec.cpus, spec.memory)) is not None:
            raise SpecError(*problem)
        most = max(sum(self.policy.max_pool_gpus(self, p) for p in group) for group in groups)
        if spec.gpus > most:
            raise SpecError("gpus", f"{spec.gpus} GPUs requested but the cluster has {most:g} that this job may use")
        limit = self.ledger.limit(spec.tenant)
        if spec.gpus > limit:
            raise SpecError(
                "gpus",
                f"{spec.gpus} GPUs requested but tenant {spec.tenant!r} may use at most {int(limit)}",
            )
        if spec.max_runtime is not None and not (spec.max_runtime > 0 and math.isfinite(spec.max_runtime)):
            raise SpecError("max_runtime", "max_runtime must be a positive number of seconds")
        if spec.est_runtime is not None and not (spec.est_runtime > 0 and math.isfinite(spec.est_runtime)):
            raise SpecError("est_runtime", "est_runtime must be a positive number of seconds")
        if spec.checkpoint_interval is not None and not (
            spec.checkpoint_interval > 0 and math.isfinite(spec.checkpoint_interval)
        ):
            raise SpecError("checkpoint_interval", "checkpoint_interval must be a positive number of seconds")
        if spec.max_retries < 0:
            raise SpecError("max_retries", "max_retries must be 0 or more")
        if spec.interactive:
            _validate_interactive(spec, self.ledger.tenant(spec.tenant))
        if spec.when not in WHEN_CHOICES:
            raise SpecError("when", f"when must be one of {', '.join(WHEN_CHOICES)}")

    def submit(self, spec: JobSpec, now: float, job_id: str | None = None) -> Job:
        self.validate(spec)
        seq = next(self._seq)
        job = Job(id=job_id or f"job-{seq}", spec=spec, submitted_at=now, seq=seq)
        if job.id in self.jobs:
            raise ValueError(f"duplicate job id {job.id}")
        self.jobs[job.id] = job
        self._changes += 1
        job.budget_demoted = self.ledger.over_budget.get(job.tenant) == "soft"
        if spec.after:  # it waits for its dependencies outside the queue (`release`)
            job.state = JobState.WAITING
            why = "waiting for " + ", ".join(spec.after)
            self.events.append(Event(job.id, now, None, JobState.WAITING, why, spec.owner or "user"))
            return job
        self.queue.push(job)
        self.events.append(Event(job.id, now, None, JobState.QUEUED, "submitted", spec.owner or "user"))
        return job

    def release(self, job_id: str, now: float, reason: str = "dependencies ended") -> Job:
        """A WAITING job's dependencies have ended: it enters the queue. Its queue clock (aging, queueing
        delay) starts now; the wait for its dependencies was not queueing."""
        job = self.get(job_id)
        self._move(job, JobState.QUEUED, now, reason)
        job.submitted_at = now
        self.queue.push(job)
        return job

    def restore(self, job: Job) -> None:
        """Re-insert a job read back from a store (service restart). No event is written."""
        if job.id in self.jobs:
            raise ValueError(f"duplicate job id {job.id}")
        self._seq = itertools.count(max(next(self._seq), job.seq + 1))
        self.jobs[job.id] = job
        self._changes += 1
        if job.state is JobState.QUEUED:
            self.queue.push(job)
        elif job.state.holds_gpus:
            self._hold(job, job.allocation, job.borrowed)

    def recover(self, job: Job, now: float, reason: str) -> Job:
        """Take back a job that was active under a previous driver run (the service died
        while it ran). It holds no GPUs now: mark it lost, then requeue or fail it by its
        retry policy."""
        if job.id in self.jobs:
            raise ValueError(f"duplicate job id {job.id}")
        if not job.state.holds_gpus:
            raise ValueError(f"job {job.id} is {job.state.value}, not active; use restore()")
        self._seq = itertools.count(max(next(self._seq), job.seq + 1))
        self.jobs[job.id] = job
        job.allocation = ()
        job.borrowed = False
        return self.lost(job.id, now, reason)

    # --- driver API: what happened -------------------------------------------------------
    def get(self, job_id: str) -> Job:
        try:
            return self.jobs[job_id]
        except KeyError:
            raise UnknownJob(job_id) from None

    def started(self, job_id: str, now: float, reason: str = "running") -> Job:
        job = self.get(job_id)
        self._move(job, JobState.RUNNING, now, reason, "backend")
        return job

    def finished(self, job_id: str, now: float, ok: bool, reason: str = "") -> Job:
        job = self.get(job_id)
        dst = JobState.SUCCEEDED if ok else JobState.FAILED
        _check(job, dst)  # refuse before releasing anything: a rejected report changes nothing
        self.queue.remove(job.id)  # QUEUED -> FAILED is legal (it could never start)
        self._release(job, now)
        self._move(job, dst, now, reason or ("completed" if ok else "failed"), "backend")
        return job

    def cancel(self, job_id: str, now: float, actor: str = "user", reason: str = "cancelled") -> Job:
        job = self.get(job_id)
        if job.state.terminal:
            raise ValueError(f"job {job_id} already ended ({job.state.value}); nothing to cancel")
        self.queue.remove(job.id)
        self._release(job, now)
        self._move(job, JobState.CANCELLED, now, reason, actor)
        return job

    def lost(self, job_id: str, now: float, reason: str = "no heartbeat") -> Job:
        """The job's process vanished. Requeue it if retries remain, else fail it."""
        job = self.get(job_id)
        _check(job, JobState.LOST)
        self._release(job, now)
        self._move(job, JobState.LOST, now, reason, "health")
        job.lost_count += 1
        if job.lost_count <= job.spec.max_retries:
            self._requeue(job, now, f"retry {job.lost_count}/{job.spec.max_retries} after: {reason}")
        else:
            self._move(job, JobState.FAILED, now, f"lost {job.lost_count} times; last: {reason}", "health")
        return job

    def not_started(self, job_id: str, now: float, reason: str) -> Job:
        """The backend could not start an admitted job; it goes back in line."""
        job = self.get(job_id)
        _check(job, JobState.QUEUED)
        self._release(job, now)
        self._requeue(job, now, reason)
        return job

    def checkpointed(self, job_id: str, now: float) -> None:
        self.get(job_id).last_checkpoint_at = now
        self._changes += 1

    def node_lost(
        self, node: str, now: float, reason: str = "node went away", *, interrupted: bool = True
    ) -> list[Job]:
        """A node vanished (spot reclaim, failure) or, with `interrupted=False`, the driver
        retired it on a scale-in. Its jobs are preempted (resuming from their checkpoint, not
        counted as a retry) and the node leaves the cluster."""
        hit = [self.jobs[j] for j in sorted(self.on_node.get(node, ()), key=lambda j: self.jobs[j].seq)]
        for job in hit:
            self.preempt(job.id, now, reason)
        if node in self.cluster:
            self.policy.node_leaving(self, node, now, interrupted)
        if node in self.cluster:
            self.cluster.remove_node(node)
        self.on_node.pop(node, None)
        self._changes += 1
        return hit

    def add_node(self, node: NodeSpec, pool: Pool | None = None) -> None:
        if pool is not None and pool.name not in self.cluster.pools:
            self.cluster.pools[pool.name] = pool
        self.cluster.add_node(node)
        self.on_node[node.name] = set()
        self._changes += 1

    # --- decisions: the only place they take effect -----------------------------------------
    def admit(self, job: Job, allocation: Allocation, borrowed: bool, now: float, reason: str = "admitted") -> None:
        self._changes += 1
        self.queue.remove(job.id)
        event = transition(job, JobState.ADMITTED, now, reason)
        pool = self.cluster.pool_of(allocation[0][0]) if allocation and allocation[0][0] in self.cluster else None
        self.events.append(dataclasses.replace(event, pool=pool))  # what budgets price its GPUs at
        self._hold(job, allocation, borrowed)
        self._decisions.append(Admit(job.id, allocation, borrowed))

    def admit_observed(self, job_id: str, placed: Mapping[str, int], now: float, reason: str) -> Job:
        """Record an admission another system made (policies/external.py): `placed` is node -> GPUs its pods
        hold. The job takes that many free GPUs of each node in the books (fewer where the books show fewer
        free: they cannot be over-drawn); a node the books do not know is left out."""
        job = self.get(job_id)
        taken = (
            (node, self.cluster.free_ids(node)[: max(0, n)])
            for node, n in sorted(placed.items())
            if node in self.cluster
        )
        allocation = tuple((node, ids) for node, ids in taken if ids)
        borrowed = self.ledger.used.get(job.tenant, 0) + job.gpus > self.ledger.tenant(job.tenant).quota
        self.admit(job, allocation, borrowed, now, reason)
        self._decisions.clear()  # carried out already: nothing for the driver to do
        return job

    def set_tenant(self, tenant: Tenant) -> None:
        """Replace a tenant's terms (quota, burst), e.g. as another system's queues report them."""
        self.ledger.tenants[tenant.name] = tenant
        self._changes += 1

    def preempt(self, job_id: str, now: float, reason: str) -> Job:
        """Stop an active job and put it back in line (it keeps its place by submit time)."""
        job = self.get(job_id)
        _check(job, JobState.PREEMPTED)
        self._release(job, now)
        self._move(job, JobState.PREEMPTED, now, reason)
        job.preemptions += 1
        self._decisions.append(Preempt(job.id, reason))
        self._requeue(job, now, "requeued after preemption")
        return job

    def scale(self, pool: str, nodes: int, reason: str) -> None:
        """Decision: ask the driver to resize `pool` to `nodes` nodes. Nothing changes here:
        the driver reports nodes as they come (`add_node`) and go (`node_lost`)."""
        self._decisions.append(Scale(pool, nodes, reason))

    def schedule(self, now: float) -> list[Decision]:
        """One scheduling pass: the policy admits and preempts; the decisions come back."""
        self._decisions = []
        self.policy.schedule(self, now)
        out, self._decisions = self._decisions, []
        return out

    def set_budgets(self, over: Mapping[str, str], why: Mapping[str, str] | None = None) -> None:
        """The tenants now over their budget -> "soft" | "hard" (core/budget.py). Soft: their
        queued jobs are ordered as the lowest class and may not borrow; hard: nothing new of
        theirs starts (queued jobs show `why`); running jobs are never touched."""
        why = why or {}
        before = self.ledger.over_budget
        self.ledger.over_budget = dict(over)
        self._changes += 1
        changed = {t for t in set(before) | set(over) if before.get(t) != over.get(t)}
        if not changed and "hard" not in over.values():
            return
        for job in list(self.queue):
            if job.tenant not in changed and not (job.tenant in why and job.reason != why[job.tenant]):
                continue
            demoted = over.get(job.tenant) == "soft"
            if demoted != job.budget_demoted:
                self.queue.remove(job.id)  # its key changes: re-sort it
                job.budget_demoted = demoted
                self.queue.push(job)
            if over.get(job.tenant) == "hard":
                job.reason = why.get(job.tenant, f"tenant {job.tenant} is over its budget")
            elif before.get(job.tenant) == "hard":
                job.reason = "budget available again"

    def drain_events(self) -> list[Event]:
        out, self.events = self.events, []
        return out

    # --- what policies ask -------------------------------------------------------------
    def pool_choices(self, spec: JobSpec) -> list[list[str]]:
        """Pools a job may use, cheapest acceptable group first: a preemptible job prefers
        spot capacity; a job that cannot be preempted never lands on spot."""
        ondemand: list[str] = []
        spot: list[str] = []
        for name, pool in sorted(self.cluster.pools.items()):
            if spec.gpu_type is not None and pool.gpu_type is not None and pool.gpu_type != spec.gpu_type:
                continue
            if (
                spec.gpu_type is not None
                and pool.gpu_type is None
                and any(p.gpu_type is not None for p in self.cluster.pools.values())
            ):
                continue
            (spot if pool.spot else ondemand).append(name)
        if spec.preemptible:
            return [g for g in (spot, ondemand) if g]
        return [ondemand] if ondemand else []

    def free_gpus_for(self, spec: JobSpec) -> int:
        """Free GPUs in every pool this job may use."""
        return sum(self.cluster.free_in_pool(p) for group in self.pool_choices(spec) for p in group)

    def place(self, job: Job, exclude: frozenset[str] | set[str] = frozenset()) -> Allocation | None:
        for pools in self.pool_choices(job.spec):
            alloc = self.cluster.place(job.gpus, pools, exclude, job.spec.cpus, job.spec.memory)
            if alloc is not None:
                return alloc
        return None

    def set_learned_runtime(self, job: Job, seconds: float | None) -> None:
        """Give `job` a learned runtime estimate (core/estimates.py); a queue grouped by estimate
        (JobQueue.walk) files it under its new group."""
        if job.spec.learned_runtime != seconds:
            self._changes += 1
            job.spec = dataclasses.replace(job.spec, learned_runtime=seconds)
            self.queue.regroup(job)

    def projected_end(self, job: Job) -> float:
        """When an active job is expected to release its GPUs (inf when unknown)."""
        est = job.spec.runtime_estimate
        start = job.started_at if job.started_at is not None else job.admitted_at
        if est is None or start is None:
            return math.inf
        return start + est

    # --- views for the API ------------------------------------------------------------------
    def position(self, job_id: str) -> int | None:
        return self.queue.position(job_id)

    def estimate_start(self, job_id: str, now: float) -> float | None:
        """When a queued job should start: this scheduler's policy run forward on a copy, every
        job ending after its runtime estimate (core/lookahead.py). None when not queued, or when
        its start waits on a job with no estimate. One forward run answers every question until
        the state changes or `LOOKAHEAD_REUSE_S` pass (a lab panel asks about ten jobs at once)."""
        job = self.get(job_id)
        if job.state is not JobState.QUEUED:
            return None
        return self.lookahead(now).estimate(job_id, now)

    def lookahead(self, now: float) -> Lookahead:
        """The forward run that answers `estimate_start` at `now`: made (the copy taken) here, run on
        as far as questions need. It is independent of this scheduler once made, so a driver may run
        it in another thread (the service does: a long run must not hold up its event loop)."""
        key = (self._changes, math.floor(now / LOOKAHEAD_REUSE_S))
        if self._lookahead is None or self._lookahead[0] != key:
            self._lookahead = (key, Lookahead(self, now))
        return self._lookahead[1]

    def queues_view(self) -> dict[str, dict]:
        zero = dict(queued=0, queued_gpus=0, running=0, interactive_queued=0, interactive_running=0)
        view = {name: dict(v, **zero) for name, v in self.ledger.snapshot().items()}
        for job in self.queue:
            v = view.setdefault(job.tenant, dict(self.ledger.snapshot().get(job.tenant, {}), **zero))
            v["queued"] += 1
            v["queued_gpus"] += job.gpus
            v["interactive_queued"] += job.spec.interactive  # shown apart: kernels waiting for GPUs
        for job in self.active.values():
            view[job.tenant]["running"] += 1
            view[job.tenant]["interactive_running"] += job.spec.interactive
        return view

    def starvation_bound(self, priority: Priority) -> float:
        return starvation_bound(priority, self.config.aging_interval)

    # --- bookkeeping ---------------------------------------------------------------------------
    def _move(self, job: Job, dst: JobState, now: float, reason: str, actor: str = "scheduler") -> None:
        self._changes += 1
        self.events.append(transition(job, dst, now, reason, actor))

    def _hold(self, job: Job, allocation: Allocation, borrowed: bool) -> None:
        self.cluster.take(allocation, job.spec.cpus, job.spec.memory)
        job.allocation = allocation
        job.borrowed = borrowed
        self.ledger.charge(job.tenant, job.gpus, borrowed, job.spec.interactive)
        self.active[job.id] = job
        if borrowed:
            self.borrowers[job.id] = job
        for node, _ in allocation:
            self.on_node.setdefault(node, set()).add(job.id)

    def _release(self, job: Job, now: float) -> None:
        if job.id not in self.active:
            return
        start = job.started_at if job.state is JobState.RUNNING else None
        if start is not None:
            job.attained_gpu_s += max(0.0, now - start) * job.gpus
        self.cluster.release(job.allocation, job.spec.cpus, job.spec.memory)
        self.ledger.refund(job.tenant, job.gpus, job.borrowed, job.spec.interactive)
        for node, _ in job.allocation:
            self.on_node.get(node, set()).discard(job.id)
        del self.active[job.id]
        self.borrowers.pop(job.id, None)
        job.allocation = ()
        job.borrowed = False

    def _requeue(self, job: Job, now: float, reason: str) -> None:
        self._move(job, JobState.QUEUED, now, reason)
        job.started_at = None
        job.admitted_at = None
        job.budget_demoted = self.ledger.over_budget.get(job.tenant) == "soft"
        self.queue.push(job)


def _validate_interactive(spec: JobSpec, tenant: Tenant) -> None:
    if spec.preemptible:
        raise SpecError("preemptible", "an interactive request cannot be preemptible: it would lose the user's state")
    if spec.gpus > tenant.interactive_cap:
        raise SpecError(
            "gpus",
            f"{spec.gpus} GPUs requested but tenant {spec.tenant!r} may hold at most {tenant.interactive_cap} "
            "in interactive kernels",
        )


def _check(job: Job, dst: JobState) -> None:
    if dst not in ALLOWED_TRANSITIONS[job.state]:
        raise IllegalTransition(job.id, job.state, dst)
