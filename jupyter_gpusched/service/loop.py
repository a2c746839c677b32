"""The live service: store + core + backend + clock.

One asyncio task drives it (`run`): each tick it takes the backend's news (started,
heartbeats, exits), applies the health rules, runs one scheduling pass, carries the
decisions out on the backend, and writes every changed job and event to the store.
All core access happens on the event loop thread, so the core needs no locks.
Kills and their grace periods run on worker threads (`kills.py`); a job admitted onto
GPUs that a dying job still holds is launched once that one is gone.
Submissions are written to the store before they are acknowledged.

A launch the backend refuses with a BackendError is an infrastructure failure, not the
notebook's: the job keeps its GPUs for a pause (`launch_backoff`, doubling), then goes back in
line (`Scheduler.not_started`); after `launch_retries` such retries in a row it fails. These
retries are counted apart from `max_retries` (re-runs after a job was lost to infrastructure
while it ran). A `LaunchRefused` (the job can never start as it stands) fails it at once.
A launch that failed later, before the notebook ran (the backend's `not_started` news: its
kernel could not start, died or never answered kernel_info), takes the same path.

One scheduler per store: a service that cannot claim its store waits as a standby (recovery.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..backends.base import Backend, BackendError, BackendUpdate, LaunchRefused, LaunchRequest
from ..backends.containment import notebook_at_launch
from ..core import (
    Admit,
    Cluster,
    Job,
    JobSpec,
    JobState,
    Pool,
    Preempt,
    Priority,
    Scheduler,
    SchedulerConfig,
    SpecError,
    Tenant,
)
from ..core.budget import Budget
from ..core.cost import PriceList
from ..core.health import HealthConfig, lost_jobs, zombie_processes
from ..core.idle import IdlePolicy
from ..core.policies.external import ExternalAdmission
from ..store import Store
from .advisor import Advisor, ScalingSettings
from .budgets import Budgets
from .estimates import Estimates
from .fencing import fence_leaky_gpus
from .forecasting import Forecasts
from .handover import Handover
from .info import JobInfo, Submission
from .interactive import KernelIdleWatch, release_after_restart
from .kills import Gpu, Kills
from .notify import NotifySettings
from .notify_jobs import JobNotices
from .pipelines import Pipelines, new_job_id
from .prometheus import PrometheusSource
from .recovery import FINISHED, LOST, NOT_STARTED, SchedulerStandby, settle, standby_message
from .schedules import Schedules
from .serverlog import log_into
from .stalls import StallSettings, StallWatch
from .views import ServiceViews

log = logging.getLogger("jupyter_gpusched")


@dataclass
class ServiceConfig:
    db_url: str
    data_dir: Path  # job folders live under data_dir / "jobs"
    root_dir: Path  # notebooks are resolved inside it
    policy: str = "dynamic"
    tenants: tuple[Tenant, ...] = ()
    interactive_share: float | None = None  # of the implicit default tenant (docs/interactive.md)
    interactive_idle: IdlePolicy = field(default_factory=IdlePolicy)  # GPU kernels' idle reclaim (core/idle.py)
    # The hub service: GPU kernels live in the users' servers, which a restart of this one leaves running, so
    # their reservations are kept (hub/orphans.py releases those whose server is gone). Else they are released.
    kernels_outlive_restart: bool = False
    default_tenant: str = "default"
    user_tenants: Mapping[str, str] = field(default_factory=dict)
    pools: tuple[Pool, ...] = ()
    # the core's knobs (aging, short_first, rules 7 and 8 of docs/scheduling.md); tenants are always strict
    scheduling: SchedulerConfig = field(default_factory=SchedulerConfig)
    tick_interval: float = 0.5
    memory_check_interval: float = 30.0  # seconds between GPU-memory leak checks
    health: HealthConfig = field(default_factory=HealthConfig)
    launch_retries: int = 3  # failed launches in a row before the job fails (apart from max_retries)
    launch_backoff: float = 1.0  # seconds of the first pause after a failed launch; doubles each time
    prometheus: PrometheusSource = field(default_factory=PrometheusSource)  # the gpu_busy series
    scaling: ScalingSettings = field(default_factory=ScalingSettings)  # pool-size advice
    stalls: StallSettings = field(default_factory=StallSettings)  # running jobs that do nothing (stalls.py)
    budgets: Mapping[str, Budget] = field(default_factory=dict)  # tenant -> its budget (budgets.py)
    notify: NotifySettings = field(default_factory=NotifySettings)  # word of a job's start and end (notify.py)


MAX_LAUNCH_PAUSE = 60.0  # seconds; well inside HealthConfig.start_timeout, so a paused job is not lost
KILL_DRAIN_TIMEOUT = 15.0  # seconds `stop` waits for kills in progress (grace period + SIGKILL + reaping)


def _gpus(job: Job) -> tuple[Gpu, ...]:
    return tuple((node, g) for node, ids in job.allocation for g in ids)


class Service(ServiceViews, Pipelines):
    def __init__(self, config: ServiceConfig, backend: Backend, clock: Callable[[], float] = time.time):
        self.config = config
        self.backend = backend
        self.clock = clock
        log_into(getattr(backend, "log", None))  # our INFO lines in the server's log, as its own
        self.store = Store(config.db_url)
        self.jobs_dir = Path(config.data_dir) / "jobs"
        self.jobs_dir.mkdir(parents=True, exist_ok=True)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop `run` is on, for wake-ups from threads
        self.kills = Kills(backend, self._wake_threadsafe)
        self.estimator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpusched-estimates")
        self.standby: str | None = None  # why this service does not schedule: another one owns the store
        self._build()
        if self.store.claim(config.data_dir):
            self._recover()
        else:
            self._stand_by()

    def _build(self) -> None:
        """A scheduler with no jobs yet, and what hangs off it."""
        config, backend, clock = self.config, self.backend, self.clock
        external = backend.admission != "core"  # another system admits (Kueue): handover.py
        tenants = list(backend.tenants() or config.tenants) if external else list(config.tenants)
        nodes = backend.inventory()
        if not any(t.name == config.default_tenant for t in tenants):
            # An unconfigured install has one tenant that owns the whole cluster.
            quota = sum(n.gpus for n in nodes) if not tenants else 0
            tenants.append(Tenant(config.default_tenant, quota=quota, interactive_share=config.interactive_share))
        self.scheduler = Scheduler(
            Cluster(nodes, config.pools),
            tenants,
            ExternalAdmission() if external else config.policy,
            replace(config.scheduling, strict_tenants=True),
        )
        self.info: dict[str, JobInfo] = {}  # job id -> what the service knows beyond the core's record
        self.kernel_watches: dict[str, KernelIdleWatch] = {}  # GPU kernels' idle watches (service/interactive.py)
        self.forecasts = Forecasts(self.usage, clock, lambda: self.scheduler.ledger.tenants, config.prometheus)
        self.advisor = Advisor(self.scheduler, self.forecasts, clock, config.scaling, getattr(backend, "elastic", True))
        self.stalls = StallWatch(config.stalls, clock)
        self.budgets = Budgets(config.budgets, PriceList.of(self.scheduler.cluster.pools.values()), self.store)
        self.estimates = Estimates(self.store, clock)  # learned runtimes (estimates.py)
        old: JobNotices | None = getattr(self, "notices", None)
        if old is not None:  # a take-over rebuilds: the old one's retries stop
            old.close()
        self.notices = JobNotices(config.notify, self.scheduler.jobs, self.info, self.store, clock)
        self.budgets.on_warning = self.notices.tenant_notice
        self.schedules = Schedules(self, clock)
        self.advisor.known = self.schedules.known_demand  # pool advice counts the recurring runs due
        self._requeue_at: dict[str, tuple[float, int, str]] = {}  # after a failed launch: (when, attempt, why)
        self._waiting_launch: dict[str, int] = {}  # job id -> attempt: admitted onto GPUs a kill still holds
        self._last_usage_minute: int | None = None
        self._last_memory_check = -math.inf
        self.handover = Handover(self) if external else None

    # --- ownership: one scheduler per store (recovery.py) ---------------------------------------
    def _stand_by(self) -> None:
        self.standby = standby_message(self.store)
        log.error("jupyter-gpusched: %s", self.standby)

    def take_over(self) -> bool:
        """On standby: claim the store if its owner has stopped, then load it. True if this service owns it now."""
        if self.standby is None:
            return True
        if not self.store.claim(self.config.data_dir):
            return False
        log.warning("jupyter-gpusched: the other scheduler stopped; this one takes over %s", self.store.owner()[1])
        self.standby = None
        self._build()  # drop anything from an earlier term as owner: the store is the truth
        self._recover()
        return True

    def require_owner(self) -> None:
        """Raise SchedulerStandby (HTTP 503, with the owner's pid) while another scheduler owns the store."""
        if self.standby is not None:
            raise SchedulerStandby(self.standby)

    # --- start / stop -------------------------------------------------------------------
    def _recover(self) -> None:
        """Reload the store. Queued jobs keep their place; a job that was active when the previous
        server stopped gets the state its run reached (recovery.settle): finished, not started, or lost."""
        now = self.clock()
        touched = []
        outcomes = {FINISHED: 0, NOT_STARTED: 0, LOST: 0}
        self.budgets.load()
        self.estimates.load()
        rows = list(self.store.load_jobs())
        # A backend whose jobs outlive the service (Kubernetes) takes over those still running.
        adopted = self.backend.adopt({job.id: (job.state, job.allocation) for job, _ in rows}) or set()
        for job, stored in rows:
            info = self.info[job.id] = JobInfo.from_dict(stored)
            if job.spec.interactive and not job.state.terminal:
                if self.config.kernels_outlive_restart and (not job.state.holds_gpus or self._fits(job)):
                    self.scheduler.restore(job)  # its kernel lives on in the user's server, on these GPUs
                else:
                    touched.append(release_after_restart(self.scheduler, job, now))
            elif job.id in adopted and self._fits(job):
                self.scheduler.restore(job)  # keeps its GPUs; its news comes through poll()
            elif job.state.holds_gpus:
                job_dir = Path(info.job_dir) if info.job_dir else self.jobs_dir / job.id
                outcomes[settle(self.scheduler, self.backend, job, info, job_dir, now)] += 1
                touched.append(job)
            else:
                self.scheduler.restore(job)
        self._persist(touched)
        self.notices.resume()  # deliveries the previous server did not record (at-least-once)
        if adopted:
            self.backend.job_dirs(
                {j: Path(i.job_dir) if i.job_dir else self.jobs_dir / j for j, i in self.info.items() if j in adopted}
            )
        if touched:
            log.info(
                "recovered %d jobs that were active before the restart: %s",
                len(touched),
                ", ".join(f"{n} {what}" for what, n in outcomes.items() if n),
            )

    def _fits(self, job: Job) -> bool:
        """Can an adopted job keep its allocation (its nodes still exist, its GPUs are free)?"""
        c = self.scheduler.cluster
        return bool(job.allocation) and all(
            node in c and set(ids) <= set(c.free_ids(node)) for node, ids in job.allocation
        )

    def start(self) -> None:
        if self._task is None:
            self._stopping = False
            self._task = asyncio.get_event_loop().create_task(self.run())

    async def stop(self) -> None:
        """Stop the loop. Running jobs keep running in their own process groups; the next
        start reaps and requeues them, so nothing acknowledged is lost."""
        if self._task is not None:
            # (Python 3.11's wait_for swallows a cancel that lands as a kick wakes it: the flag ends the loop)
            self._stopping = True
            self._wake.set()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        await self.kills.drain(timeout=KILL_DRAIN_TIMEOUT)  # a cancelled job's processes die before we go
        self.stalls.close()
        if self.standby is None:
            self.notices.settle()  # record what was delivered, so the next start does not send it again
        self.notices.close()
        self.estimator.shutdown(wait=False, cancel_futures=True)  # a forward run left works on a copy only
        self.store.close()  # and with it the claim: a standby may take over

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        while not self._stopping:
            try:
                if self.take_over():  # (on standby: once the owner has stopped)
                    self.tick()
            except Exception:  # never let one bad tick stop the scheduler
                log.exception("scheduler tick failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self.config.tick_interval)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    def kick(self) -> None:
        """Ask for a pass soon (after a submit or cancel) instead of waiting for the tick."""
        self._wake.set()

    def _wake_threadsafe(self) -> None:
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:  # the loop is closed: nobody to wake
                pass

    # --- one tick ---------------------------------------------------------------------------
    def tick(self) -> None:
        if self.standby is not None:
            return
        if not self.store.still_owned():  # its lock file was removed, or another took the database's lock
            self.store.release()
            self._stand_by()
            return
        now = self.clock()
        self.schedules.fire_due(now)  # first: each run is submitted (and persisted) on its own
        s = self.scheduler
        touched: dict[str, Job] = {}
        for update in self.backend.poll():
            if self.handover is not None:
                self.handover.observed(update)  # (an admission the other system made: booked first)
            job = self._apply_update(update)
            if job is not None:
                touched[job.id] = job
        self.kills.settle()
        for job in self._launch_waiting(now):
            touched[job.id] = job
        for job in self.handover.tick(now) if self.handover is not None else ():
            touched[job.id] = job
        heartbeats = {jid: info.heartbeat_at for jid in s.active if (info := self.info.get(jid)) and info.heartbeat_at}
        for jid in lost_jobs(list(s.active.values()), heartbeats, now, self.config.health):
            self._kill(jid, "no heartbeat", _gpus(s.jobs[jid]))
            touched[jid] = s.lost(jid, now, "no heartbeat from the runner")
        for job in self._requeue_paused(now):
            touched[job.id] = job
        for job in self.settle_dependencies(now):  # WAITING jobs whose dependencies ended (pipelines.py)
            touched[job.id] = job
        for job in self._watch_stalls(now):
            touched[job.id] = job
        self._reap_zombies()
        if now - self._last_memory_check >= self.config.memory_check_interval:
            self._last_memory_check = now
            fence_leaky_gpus(self.scheduler, self.backend.gpu_memory_used_mib(), self.config.health)
        # A pass may admit a job and preempt it again (reclaim, spot make-room), or preempt
        # a running job and admit it elsewhere: only the net outcome reaches the backend.
        held = {jid: _gpus(job) for jid, job in s.active.items()}  # a preempted job's GPUs, before the pass frees them
        first: dict[str, Admit | Preempt] = {}
        self.estimates.refresh(s)
        self.budgets.enforce(s, now)
        for decision in s.schedule(now):
            if isinstance(decision, (Admit, Preempt)):  # pools are fixed here: Scale is the simulator's
                first.setdefault(decision.job_id, decision)
        admitted = []
        for job_id, decision in first.items():
            job = touched[job_id] = s.jobs[job_id]
            if isinstance(decision, Preempt):  # it was running before this pass
                self._kill(job_id, decision.reason, held.get(job_id, ()), preempt=True)
            if job.state is JobState.ADMITTED:
                admitted.append(job)
        if admitted:
            # Written down before anything starts: a server that dies from here on finds these jobs
            # active and asks their folders how far they got, instead of starting them again.
            self._persist(touched.values())
        for job in admitted:
            self._launch_when_free(job, now)
        self._persist(touched.values())
        self.notices.settle()
        self._record_usage(now)

    def _reap_zombies(self) -> None:
        """Kill processes the backend still runs for jobs the scheduler no longer counts as active."""
        for job_id in zombie_processes(self.scheduler.active, self.backend.running()):
            log.warning("killing zombie process of job %s", job_id)
            self._kill(job_id, "zombie: the job is no longer active", ())

    def _apply_update(self, u: BackendUpdate) -> Job | None:
        s = self.scheduler
        if u.kind in ("node_added", "node_lost"):
            self._apply_node_update(u)
            return None
        job = s.jobs.get(u.job_id)
        if job is None or not job.state.holds_gpus:
            return None  # news about a job we already stopped (cancel, preemption)
        info = self.info.setdefault(job.id, JobInfo())
        info.heartbeat_at = u.time
        if u.progress is not None:
            info.progress = list(u.progress)
        if u.kind in ("started", "heartbeat", "succeeded", "failed"):
            info.launch_failures = 0  # it started: failed launches "in a row" count from here
        if u.kind == "started" and job.state is JobState.ADMITTED:
            s.started(job.id, u.time)
        elif u.kind == "heartbeat" and job.state is JobState.ADMITTED:
            s.started(job.id, u.time)
        if u.checkpoint_at is not None and u.checkpoint_at != job.last_checkpoint_at:  # the notebook saved
            s.checkpointed(job.id, u.checkpoint_at)
        if u.kind == "heartbeat" and u.activity is not None:
            self.stalls.observe(job, info, u.activity, "runner")
        elif u.kind in ("succeeded", "failed"):
            if job.state is JobState.ADMITTED:
                s.started(job.id, u.time)
            info.message = u.message
            s.finished(job.id, u.time, ok=u.kind == "succeeded", reason=u.message)
        elif u.kind == "not_started":  # its kernel never came up: a failed launch, not the notebook's failure
            if job.state is JobState.ADMITTED:
                self._launch_failed(job, info, u.time, BackendError(u.message or "the kernel did not start"))
        elif u.kind == "preempted":  # stopped through no fault of its own: back in line, no retry used
            gpus = _gpus(job)
            s.preempt(job.id, u.time, u.message or "preempted by the backend")
            self._kill(job.id, u.message or "preempted", gpus)
        elif u.kind == "lost":  # its run vanished: requeued or failed by its retry policy
            gpus = _gpus(job)
            s.lost(job.id, u.time, u.message or "lost by the backend")
            self._kill(job.id, u.message or "lost", gpus)
        return job

    def _apply_node_update(self, u: BackendUpdate) -> None:
        """Capacity changed under a cluster backend: a node joined, or went away (spot reclaim) and the
        jobs on it are preempted (they resume from their checkpoint elsewhere)."""
        s, node = self.scheduler, u.node
        if node is None:
            return
        if u.kind == "node_added" and node.name not in s.cluster:
            s.add_node(node, u.pool)
            log.info("node %s joined (%d GPUs, pool %s)", node.name, node.gpus, node.pool)
        elif u.kind == "node_lost" and node.name in s.cluster:
            held = {jid: _gpus(job) for jid, job in s.active.items()}
            hit = s.node_lost(node.name, u.time, u.message or f"node {node.name} went away")
            for job in hit:
                self._kill(job.id, f"node {node.name} went away", held.get(job.id, ()))
            self._persist(hit)
            log.warning("node %s went away; %d jobs requeued", node.name, len(hit))

    def _watch_stalls(self, now: float) -> list[Job]:
        """Feed the stall watch Prometheus' reports and let it judge the running jobs (stalls.py)."""
        running = [j for j in self.scheduler.active.values() if j.state is JobState.RUNNING]
        for job_id, activity in self.stalls.sample_prometheus(running, now).items():
            job = self.scheduler.jobs.get(job_id)
            if job is not None and job_id in self.info:
                self.stalls.observe(job, self.info[job_id], activity, "prometheus")
        return self.stalls.sweep(self.scheduler, self.info, now, lambda job, why: self._kill(job.id, why, _gpus(job)))

    def _kill(self, job_id: str, reason: str, gpus: tuple[Gpu, ...], preempt: bool = False) -> None:
        """Stop a job's processes off the event loop (`Kills`); `gpus` stay unused until they are gone."""
        self.kills.start(job_id, reason, gpus, preempt=preempt)

    def _launch_when_free(self, job: Job, now: float) -> None:
        """Launch an admitted job, or, while a dying job still holds its GPUs, once that one is gone."""
        if self.kills.blocks(job.id, _gpus(job)):
            self._waiting_launch[job.id] = job.attempts
        else:
            self._launch(job, now)

    def _launch_waiting(self, now: float) -> list[Job]:
        """Launch the admitted jobs whose GPUs the kills have now freed."""
        launched = []
        for job_id, attempt in list(self._waiting_launch.items()):
            job = self.scheduler.jobs.get(job_id)
            if job is None or job.state is not JobState.ADMITTED or job.attempts != attempt:
                del self._waiting_launch[job_id]  # cancelled or preempted meanwhile
            elif not self.kills.blocks(job_id, _gpus(job)):
                del self._waiting_launch[job_id]
                self._launch(job, now)
                launched.append(job)
        return launched

    def _launch(self, job: Job, now: float) -> None:
        if job.spec.interactive:  # a GPU kernel's reservation: nothing runs here, its kernel starts on the GPUs
            self.scheduler.started(job.id, now, "reserved for its kernel")
            return
        info = self.info.setdefault(job.id, JobInfo())
        try:
            self.backend.launch(self.launch_request(job, now))
        except LaunchRefused as exc:
            log.warning("job %s can never start: %s", job.id, exc)
            info.message = f"could not start: {exc}"
            self.scheduler.finished(job.id, now, ok=False, reason=info.message)
        except (BackendError, OSError) as exc:
            self._launch_failed(job, info, now, exc)

    def launch_request(self, job: Job, now: float) -> LaunchRequest:
        """What the backend needs to run this attempt of `job`, with its folder made and its run's record reset.
        Raises LaunchRefused when its notebook was swapped for a link since submission, OSError when unreadable."""
        job_dir = self.jobs_dir / job.id
        job_dir.mkdir(parents=True, exist_ok=True)
        info = self.info.setdefault(job.id, JobInfo())
        info.job_dir, info.heartbeat_at, info.progress, info.message = str(job_dir), now, None, ""
        # The stall clock starts with the first report from the running notebook, not at launch: bringing a
        # kernel up is not a stall (one that never comes up is the start deadline's business).
        info.progress_at, info.stalled_since, info.activity, info.waiting_on_data = None, None, None, None
        self.stalls.forget(job.id)
        # checked again now: a link swapped in since submission is refused, never followed
        notebook = notebook_at_launch(self.config.root_dir, job.spec.notebook)
        return LaunchRequest(
            job_id=job.id,
            notebook=notebook,
            cwd=notebook.parent,
            parameters=dict(job.spec.parameters),
            gpu_ids=tuple(g for _, ids in job.allocation for g in ids),
            job_dir=job_dir,
            max_runtime=job.spec.max_runtime,
            spec=job.spec,
            allocation=job.allocation,
            attempt=max(1, job.attempts),
            checkpoint_interval=self._checkpoint_interval(job, now),
            preempt_grace=self.scheduler.cluster.preempt_grace(job.allocation),
            environment=self.inputs_environment(job),
        )

    def _checkpoint_interval(self, job: Job, now: float) -> float | None:
        """What the policy wants this attempt to checkpoint at (spot pools), for jobs that checkpoint."""
        return self.scheduler.policy.handed_interval(self.scheduler, job, now)

    def _launch_failed(self, job: Job, info: JobInfo, now: float, exc: Exception) -> None:
        """The backend could not start the job: back in line after a pause, or failed after too many tries."""
        info.launch_failures += 1
        tries, retries = info.launch_failures, self.config.launch_retries
        if tries > retries:
            log.warning("could not start job %s (%d tries), giving up: %s", job.id, tries, exc)
            info.message = f"could not start: {exc} (gave up after {tries} tries)"
            self.scheduler.finished(job.id, now, ok=False, reason=info.message)
            return
        pause = min(self.config.launch_backoff * 2 ** (tries - 1), MAX_LAUNCH_PAUSE)
        log.warning("could not start job %s (try %d), again in %g s: %s", job.id, tries, pause, exc)
        # It keeps its GPUs during the pause, so the next pass does not hand them straight back to it.
        info.message = f"could not start: {exc} (launch retry {tries} of {retries} in {pause:g} s)"
        self._requeue_at[job.id] = (now + pause, job.attempts, info.message)

    def _requeue_paused(self, now: float) -> list[Job]:
        """Jobs whose pause after a failed launch is over go back in line (`Scheduler.not_started`)."""
        back = []
        for job_id, (when, attempt, why) in list(self._requeue_at.items()):
            job = self.scheduler.jobs.get(job_id)
            if job is None or job.state is not JobState.ADMITTED or job.attempts != attempt:
                del self._requeue_at[job_id]  # cancelled, preempted or lost meanwhile
            elif now >= when:
                del self._requeue_at[job_id]
                back.append(self.scheduler.not_started(job_id, now, why))
        return back

    def _persist(self, jobs) -> None:
        jobs = list(jobs)
        events = self.scheduler.drain_events()
        self.store.record(jobs, events, {j.id: self.info[j.id].to_dict() if j.id in self.info else {} for j in jobs})
        self.budgets.feed(events, self.scheduler)
        self.estimates.feed(events, self.scheduler.jobs)
        self.notices.on_events(events)  # after the record: what is sent is in the store

    def _record_usage(self, now: float) -> None:
        minute = int(now // 60)
        if minute == self._last_usage_minute:
            return
        self._last_usage_minute = minute
        per_tenant: dict[str, list[int]] = {t: [0, 0] for t in self.scheduler.ledger.tenants}
        for job in self.scheduler.queue:
            per_tenant.setdefault(job.tenant, [0, 0])[0] += job.gpus
        for job in self.scheduler.active.values():
            row = per_tenant.setdefault(job.tenant, [0, 0])
            row[0] += job.gpus
            row[1] += job.gpus
        self.store.record_usage(minute, {t: (r, a) for t, (r, a) in per_tenant.items()})

    # --- the API the handlers call ---------------------------------------------------------------
    def tenant_for(self, user: str, requested: str | None) -> str:
        return requested or self.config.user_tenants.get(user) or self.config.default_tenant

    def submit(self, *, job_id: str | None = None, **fields: Any) -> Job:
        """Validate, queue (or, with `after`, hold WAITING) and durably record a job. Raises SpecError on bad
        input. `fields` are `checked`'s; `job_id`: the id to use (a schedule's run names its slot)."""
        return self.enter([self.checked(**fields)], [job_id] if job_id else ())[0]

    def checked(self, *, stall_timeout: float | None = None, notify: Any = None, **fields: Any) -> Submission:
        """A checked job spec with what the service keeps beside it (SpecError on bad input); nothing is
        submitted yet. `notify`: the job's targets (None: its owner's defaults; [] none)."""
        spec = self.job_spec(**fields)
        targets = self.notices.targets_for(notify, spec.owner or "", spec.tenant)
        return Submission(spec, stall_timeout, tuple(t.to_dict() for t in targets))

    def job_spec(
        self,
        *,
        notebook: str,
        owner: str,
        gpus: int = 1,
        priority: str = "normal",
        tenant: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        max_runtime: float | None = None,
        checkpoint_interval: float | None = None,
        preemptible: bool = False,
        max_retries: int = 2,
        gpu_type: str | None = None,
        cpus: float = 0.0,
        memory: int = 0,
        interactive: bool = False,
        after: Sequence[str] = (),
        when: str = "succeeded",
        pipeline_id: str | None = None,
        schedule_id: str | None = None,
    ) -> JobSpec:
        """A checked job spec (SpecError on bad input); nothing is submitted yet."""
        self.require_owner()
        try:
            prio = Priority.parse(priority)
        except ValueError as exc:
            raise SpecError("priority", str(exc)) from None
        spec = JobSpec(
            notebook=notebook,
            gpus=gpus,
            priority=prio,
            tenant=self.tenant_for(owner, tenant),
            owner=owner,
            parameters=dict(parameters or {}),
            max_runtime=max_runtime,
            checkpoint_interval=checkpoint_interval,
            preemptible=preemptible,
            max_retries=max_retries,
            gpu_type=gpu_type,
            est_runtime=None,
            cpus=cpus,
            memory=memory,
            interactive=interactive,
            after=tuple(after),
            when=when,
            pipeline_id=pipeline_id,
            schedule_id=schedule_id,
        )
        self.scheduler.validate(spec)
        try:  # e.g. the Kubernetes API server's own validation (a dry run), so its message reaches the user
            if not interactive:  # a kernel's reservation runs no notebook
                self.backend.check(spec, (self.config.root_dir / notebook).resolve(), spec.parameters)
        except BackendError as exc:
            raise SpecError(getattr(exc, "field", None) or "spec", str(exc)) from None
        return spec

    def enter(self, submissions: Sequence[Submission], ids: Sequence[str] = ()) -> list[Job]:
        """Submit checked jobs together and record them in one transaction.
        `ids`: the job ids to use (a pipeline's steps name each other); new ones by default."""
        self.require_owner()
        now = self.clock()
        jobs = []
        for i, sub in enumerate(submissions):
            job = self.scheduler.submit(sub.spec, now, job_id=ids[i] if ids else new_job_id())
            info = JobInfo(job_dir=str(self.jobs_dir / job.id), stall_timeout=sub.stall_timeout)
            info.notify = list(sub.notify)
            self.info[job.id] = info
            jobs.append(job)
        self._persist(jobs + self.settle_dependencies(now))  # a dependency that already ended counts at once
        self.kick()
        return jobs

    def cancel(self, job_id: str, actor: str) -> Job:
        self.require_owner()
        job = self.get(job_id)
        was_active, gpus = job.state.holds_gpus, _gpus(job)
        self.scheduler.cancel(job_id, self.clock(), actor=actor, reason=f"cancelled by {actor}")
        if was_active:
            self._kill(job_id, "cancelled", gpus)
        self._persist([job])
        self.kick()
        return job
