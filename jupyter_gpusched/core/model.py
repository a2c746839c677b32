"""The scheduler's vocabulary: jobs, their lifecycle, nodes, tenants, decisions.

Pure data and the one transition function. Times are plain floats (seconds) handed
in by the driver: the live service passes wall-clock time, the simulator a virtual clock.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any


class Priority(enum.IntEnum):
    """Priority classes. A larger value is more urgent."""

    LOW = 0
    NORMAL = 1
    HIGH = 2

    @classmethod
    def parse(cls, value: str | int | Priority) -> Priority:
        if isinstance(value, Priority):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                raise ValueError(f"unknown priority {value!r}; use one of high, normal, low") from None
        if isinstance(value, int) and not isinstance(value, bool) and value in cls._value2member_map_:
            return cls(value)
        raise ValueError(f"unknown priority {value!r}; use one of high, normal, low")

    @property
    def label(self) -> str:
        return self.name.lower()


class JobState(str, enum.Enum):
    WAITING = "WAITING"  # for its dependencies (`JobSpec.after`); not in the queue yet
    QUEUED = "QUEUED"
    ADMITTED = "ADMITTED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    PREEMPTED = "PREEMPTED"
    LOST = "LOST"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def holds_gpus(self) -> bool:
        return self in (JobState.ADMITTED, JobState.RUNNING)


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
TERMINAL_STATE_NAMES = frozenset(s.value for s in TERMINAL_STATES)  # as the API spells them

# The lifecycle (DESIGN.md): every other move is illegal.
ALLOWED_TRANSITIONS: Mapping[JobState, frozenset[JobState]] = {
    JobState.WAITING: frozenset({JobState.QUEUED, JobState.CANCELLED}),  # released, or a dependency failed
    JobState.QUEUED: frozenset({JobState.ADMITTED, JobState.CANCELLED, JobState.FAILED}),
    JobState.ADMITTED: frozenset(
        {
            JobState.RUNNING,
            JobState.QUEUED,  # the backend could not start it; back in line
            JobState.PREEMPTED,
            JobState.LOST,
            JobState.FAILED,
            JobState.CANCELLED,
        }
    ),
    JobState.RUNNING: frozenset(
        {
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.PREEMPTED,
            JobState.LOST,
        }
    ),
    JobState.PREEMPTED: frozenset({JobState.QUEUED, JobState.CANCELLED}),
    JobState.LOST: frozenset({JobState.QUEUED, JobState.FAILED, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


class IllegalTransition(ValueError):
    """A state change the lifecycle does not allow."""

    def __init__(self, job_id: str, src: JobState, dst: JobState):
        super().__init__(f"job {job_id} cannot go from {src.value} to {dst.value}")
        self.job_id = job_id
        self.src = src
        self.dst = dst


@dataclass(frozen=True, slots=True)
class JobSpec:
    """What the user asked for. Immutable once submitted."""

    notebook: str
    gpus: int = 1
    priority: Priority = Priority.NORMAL
    tenant: str = "default"
    owner: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    max_runtime: float | None = None  # seconds; the backend kills the job past it
    preemptible: bool = False  # may run on spot capacity / be preempted at any time
    max_retries: int = 2  # requeues after the job is LOST (node gone, no heartbeat)
    gpu_type: str | None = None
    # A runtime estimate for backfill. The live service uses max_runtime; the
    # simulator may pass the trace's duration only to oracle policies.
    est_runtime: float | None = None
    # Learned from earlier runs like it (core/estimates.py); set by the driver, not the user.
    learned_runtime: float | None = None
    checkpoint_interval: float | None = None  # seconds between checkpoints, if it checkpoints
    # On each node it runs on, beside its GPUs (0: not counted). Only nodes that report their CPUs
    # and memory (NodeSpec) hold a job to them; the local backend does.
    cpus: float = 0.0
    memory: int = 0  # MiB
    # A GPU kernel's reservation (docs/interactive.md): never preempted, runs within its tenant's
    # quota only (borrowed GPUs are reclaimable), capped by the tenant's interactive share.
    interactive: bool = False
    # Pipelines (core/dependencies.py): it waits (WAITING) until the jobs in `after` have ended; under
    # "succeeded" a dependency that failed or was cancelled cancels it, under "ended" any end releases it.
    after: tuple[str, ...] = ()
    when: str = "succeeded"
    pipeline_id: str | None = None  # the pipeline it was submitted in, if any
    schedule_id: str | None = None  # the recurring schedule this run belongs to (service/schedules.py)

    @property
    def runtime_estimate(self) -> float | None:
        """est_runtime, else the learned runtime (never past max_runtime: the job is stopped there),
        else max_runtime."""
        if self.est_runtime is not None:
            return self.est_runtime
        if self.learned_runtime is not None:
            return self.learned_runtime if self.max_runtime is None else min(self.learned_runtime, self.max_runtime)
        return self.max_runtime


Allocation = tuple[tuple[str, tuple[int, ...]], ...]
"""Where a job runs: ((node name, (gpu index, ...)), ...). One entry unless it spans nodes."""


@dataclass(slots=True, eq=False)
class Job:
    id: str
    spec: JobSpec
    submitted_at: float
    seq: int  # submission order; breaks ties so decisions never depend on dict order
    state: JobState = JobState.QUEUED
    allocation: Allocation = ()
    borrowed: bool = False  # admitted beyond its tenant's quota: reclaimable
    admitted_at: float | None = None
    started_at: float | None = None  # of the current attempt
    first_started_at: float | None = None  # of the first attempt: queueing delay ends here
    finished_at: float | None = None
    attempts: int = 0  # times admitted
    lost_count: int = 0
    preemptions: int = 0
    attained_gpu_s: float = 0.0  # GPU-seconds of service so far (all attempts)
    last_checkpoint_at: float | None = None
    reason: str = ""  # why it is in its current state
    budget_demoted: bool = False  # its tenant is over a soft budget: ordered as the lowest class
    # Its place in line counts from this long after its submission (`dynamic` sets it when it
    # pauses the job's run for one that has not run: from the pause; `aged_key` reads it). Stored.
    line_shift_s: float = 0.0

    def __deepcopy__(self, memo: dict) -> Job:
        """Every field holds a value nobody changes in place (numbers, strings, tuples, the frozen
        spec): a field-by-field copy is a deep one, and a copy of the scheduler (core/lookahead.py)
        copies hundreds of jobs per estimate."""
        return Job(*_job_fields(self))

    @property
    def gpus(self) -> int:
        return self.spec.gpus

    @property
    def tenant(self) -> str:
        return self.spec.tenant

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(node for node, _ in self.allocation)


_job_fields = operator.attrgetter(*(f.name for f in fields(Job)))  # every field, in the constructor's order


def attained_now(job: Job, now: float) -> float:
    """GPU-seconds of service so far, the running attempt included."""
    a = job.attained_gpu_s
    if job.started_at is not None:
        a += max(0.0, now - job.started_at) * job.gpus
    return a


def work_at_risk(job: Job, now: float) -> float:
    """GPU-seconds a preemption would throw away: since its last checkpoint, or its start."""
    since = job.started_at if job.started_at is not None else now
    if job.last_checkpoint_at is not None and job.last_checkpoint_at > since:
        since = job.last_checkpoint_at
    return (now - since) * job.gpus


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded move of one job: who moved it, when, why."""

    job_id: str
    time: float
    src: JobState | None  # None for the submission itself
    dst: JobState
    reason: str = ""
    actor: str = "scheduler"
    pool: str | None = None  # on ADMITTED: the pool of the GPUs it was given (for accounting)


def transition(job: Job, dst: JobState, now: float, reason: str = "", actor: str = "scheduler") -> Event:
    """The one way a job changes state: reject illegal moves, stamp times, return the event."""
    src = job.state
    if dst not in ALLOWED_TRANSITIONS[src]:
        raise IllegalTransition(job.id, src, dst)
    job.state = dst
    job.reason = reason
    if dst is JobState.ADMITTED:
        job.admitted_at = now
        job.attempts += 1
    elif dst is JobState.RUNNING:
        job.started_at = now
        if job.first_started_at is None:
            job.first_started_at = now
    elif dst in TERMINAL_STATES:
        job.finished_at = now
    return Event(job.id, now, src, dst, reason, actor)


@dataclass(frozen=True, slots=True)
class Tenant:
    """A team or queue. `quota` GPUs are guaranteed; up to `burst` more may be borrowed
    while idle and are reclaimed (by preempting the borrower) when their owner needs them."""

    name: str
    quota: int
    burst: int | None = None  # None: may borrow any idle GPU
    interactive_share: float | None = None  # at most this fraction of `quota` held by GPU kernels; None: all of it

    @property
    def limit(self) -> float:
        return float("inf") if self.burst is None else self.quota + self.burst

    @property
    def interactive_cap(self) -> int:
        """The most GPUs its interactive requests may hold at once (never past its quota)."""
        if self.interactive_share is None:
            return self.quota
        return min(self.quota, int(self.quota * self.interactive_share + 1e-9))


@dataclass(frozen=True, slots=True)
class Pool:
    """A group of alike nodes: on-demand or spot, with a price per GPU-hour."""

    name: str
    spot: bool = False
    price_per_gpu_hour: float = 0.0
    gpu_type: str | None = None
    min_nodes: int = 0
    max_nodes: int | None = None
    node_gpus: int | None = None  # GPUs on a node added when the pool grows (None: unknown)
    gpu_memory_mib: int | None = None  # memory of one GPU (None: unknown); shown, not scheduled on
    preempt_grace: float | None = None  # seconds a preempted job here has to save (None: the backend's setting)


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    gpus: int
    pool: str = "default"
    cpus: float | None = None  # None: not counted (jobs' `cpus` are not held to it)
    memory: int | None = None  # MiB; None: not counted


@dataclass(frozen=True, slots=True)
class Admit:
    """Decision: start `job_id` on `allocation`."""

    job_id: str
    allocation: Allocation
    borrowed: bool = False


@dataclass(frozen=True, slots=True)
class Preempt:
    """Decision: stop `job_id` (it goes back to the queue) to free its GPUs."""

    job_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Scale:
    """Decision: resize `pool` to `nodes` nodes."""

    pool: str
    nodes: int
    reason: str


Decision = Admit | Preempt | Scale
