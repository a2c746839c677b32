"""The stall watch: running jobs that do nothing, jobs that wait on their data, idle GPUs.

Reports of what a job does (core.stalls.Activity) come from two sources:
- `runner`: the local runner's heartbeat (cells, output, CPU and I/O of its processes, NVML);
- `prometheus`: DCGM series for the job's GPUs (and, where a selector for them is set, cAdvisor's
  CPU and storage counters of its pods), sampled every `prometheus_interval` on a worker thread.
A job whose reports show no progress (core.stalls.progress) for its `stall_timeout` is stalled:
marked (`stalled_since`, an event in its history, a log line, a count in the metrics) and, by the
`on_stall` policy, after `grace` seconds more, requeued (by its retry policy, like a lost job) or
failed; both stop its processes and free its GPUs through the service's kill path. A job that no
source reports on is never judged. The same reports count GPU-seconds: allocated, idle (below
`StallRules.gpu_busy`) and waiting on data (core.stalls.input_bound), per job, summed per tenant.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..core import Job, JobState, Scheduler
from ..core.model import Event
from ..core.stalls import MIB, Activity, StallRules, gpu_idle, input_bound, progress, stalled
from .errors import UpstreamError
from .info import JobInfo
from .prometheus import promql_regex, promql_string, query_value

log = logging.getLogger("jupyter_gpusched")

POLICIES = ("alert", "requeue", "fail")
MAX_ACCOUNTED_GAP = 300.0  # seconds: a longer gap between two reports is not counted as idle or busy
DEFAULT_GPU_SELECTOR = 'Hostname="{node}",gpu=~"{gpus}"'
ACTOR = "stall watch"


@dataclass(frozen=True)
class StallSettings:
    timeout: float = 1800.0  # seconds without progress; 0: off (a job's own stall_timeout wins)
    on_stall: str = "alert"  # alert | requeue | fail
    grace: float = 300.0  # seconds between marking a job stalled and requeueing or failing it
    rules: StallRules = field(default_factory=StallRules)
    prometheus_url: str = ""  # "": no Prometheus reports
    gpu_selector: str = DEFAULT_GPU_SELECTOR  # DCGM labels of one node's GPUs of a job: {node} {gpus} {job}
    process_selector: str = ""  # cAdvisor labels of a job's containers, e.g. pod=~"gpusched-{job}-.*"; "": none
    prometheus_interval: float = 60.0  # seconds between samples
    prometheus_window: float = 120.0  # seconds each GPU utilisation sample averages over


def _fill(template: str, job_id: str, node: str = "", gpus: Iterable[int] = ()) -> str:
    """A selector template with its placeholders filled, each value escaped for a PromQL string."""
    return (
        template.replace("{job}", promql_string(job_id))
        .replace("{node}", promql_string(node))
        .replace("{gpus}", promql_string(promql_regex([str(g) for g in gpus])))
    )


def prometheus_activity(settings: StallSettings, job_id: str, allocation, at: float) -> Activity | None:
    """A job's figures at time `at` from Prometheus; None when it has no series for the job's GPUs.
    Blocking: call it from a worker thread."""
    url, window = settings.prometheus_url, f"{int(settings.prometheus_window)}s"
    gpu = [f"{{{_fill(settings.gpu_selector, job_id, node, ids)}}}" for node, ids in allocation if ids]
    if not url or not gpu:
        return None
    util = query_value(
        url, "avg(" + " or ".join(f"avg_over_time(DCGM_FI_DEV_GPU_UTIL{g}[{window}])" for g in gpu) + ")", at
    )
    if util is None:
        return None
    memory = query_value(
        url, "sum(" + " or ".join(f"avg_over_time(DCGM_FI_DEV_FB_USED{g}[{window}])" for g in gpu) + ")", at
    )
    cpu = io = None
    if settings.process_selector:
        procs = f"{{{_fill(settings.process_selector, job_id)}}}"
        cpu = query_value(url, f"sum(container_cpu_usage_seconds_total{procs})", at)
        reads = query_value(url, f"sum(container_fs_reads_bytes_total{procs})", at)
        writes = query_value(url, f"sum(container_fs_writes_bytes_total{procs})", at)
        io = None if reads is None and writes is None else (reads or 0.0) + (writes or 0.0)
    return Activity(time=at, cpu_seconds=cpu, io_bytes=io, gpu_util=util, gpu_memory_mib=memory)


class StallWatch:
    def __init__(self, settings: StallSettings, clock: Callable[[], float]):
        if settings.on_stall not in POLICIES:
            raise ValueError(f"on_stall must be one of {', '.join(POLICIES)}, not {settings.on_stall!r}")
        self.settings = settings
        self.clock = clock
        self._mark: dict[tuple[str, str], Activity] = {}  # (job, source) -> last report that showed progress
        self._last: dict[tuple[str, str], Activity] = {}  # (job, source) -> last report
        self._prometheus_gpus: set[str] = set()  # jobs Prometheus has GPU figures for: it does their accounting
        self.stalls = Counter[str]()  # stalls seen since start, by what was done: alerted, requeued, failed
        self._pool: ThreadPoolExecutor | None = None
        self._sampling: Future | None = None
        self._last_sample = float("-inf")

    # --- reports ------------------------------------------------------------------------------
    def forget(self, job_id: str) -> None:
        """A new attempt starts: nothing of the last one's reports carries over."""
        for key in [k for k in self._mark if k[0] == job_id]:
            del self._mark[key]
        for key in [k for k in self._last if k[0] == job_id]:
            del self._last[key]
        self._prometheus_gpus.discard(job_id)

    def observe(self, job: Job, info: JobInfo, report: Mapping[str, Any] | Activity | None, source: str) -> None:
        """Take one report on a running job: move its progress mark, count its GPU-seconds, flag it."""
        now = report if isinstance(report, Activity) else Activity.from_report(report)
        if now is None or job.state is not JobState.RUNNING:
            return
        key, rules = (job.id, source), self.settings.rules
        mark = self._mark.get(key)
        why = progress(mark, now, rules)
        info.reported_at = self.clock()
        if why and (mark is not None or info.progress_at is None):  # a restart's first report keeps the clock
            info.progress_at, info.progress_why = info.reported_at, why
        if why:
            self._mark[key] = now
        before = self._last.get(key)
        self._last[key] = now
        if source == "prometheus" and now.gpu_util is not None:
            self._prometheus_gpus.add(job.id)
        elif job.id in self._prometheus_gpus:
            info.activity = {**(info.activity or {}), **_figures(now, before, source, exclude_gpu=True)}
            return
        info.activity = _figures(now, before, source)
        if before is None or now.gpu_util is None:
            return
        seconds = now.time - before.time
        if not 0 < seconds <= MAX_ACCOUNTED_GAP:
            return
        gpu_s = seconds * job.gpus
        info.gpu_s += gpu_s
        if gpu_idle(now, rules):
            info.idle_gpu_s += gpu_s
        waiting = input_bound(before, now, rules)
        if waiting is not None:
            info.data_wait_gpu_s += gpu_s
            if info.waiting_on_data is None:
                log.info("job %s waits on its data: %s", job.id, waiting)
        info.waiting_on_data = waiting

    # --- Prometheus, on a worker thread -------------------------------------------------------
    def sample_prometheus(self, running: list[Job], now: float) -> dict[str, Activity]:
        """Start a sample of the running jobs when one is due; return the last one's reports once done."""
        s = self.settings
        if not s.prometheus_url:
            return {}
        done: dict[str, Activity] = {}
        if self._sampling is not None and self._sampling.done():
            try:
                done = self._sampling.result()
            except UpstreamError as exc:
                log.warning("stall watch: %s", exc)
            self._sampling = None
        if self._sampling is None and now - self._last_sample >= s.prometheus_interval and running:
            self._last_sample = now
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpusched-stalls")
            jobs = [(j.id, j.allocation) for j in running]
            self._sampling = self._pool.submit(self._sample, jobs, now)
        return done

    def _sample(self, jobs: list[tuple[str, Any]], at: float) -> dict[str, Activity]:
        out = {}
        for job_id, allocation in jobs:
            activity = prometheus_activity(self.settings, job_id, allocation, at)
            if activity is not None:
                out[job_id] = activity
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    # --- judging ------------------------------------------------------------------------------
    def sweep(
        self,
        scheduler: Scheduler,
        infos: Mapping[str, JobInfo],
        now: float,
        stop: Callable[[Job, str], None],
    ) -> list[Job]:
        """Mark the running jobs that stalled (and unmark those that moved again); requeue or fail those
        stalled past the grace by the policy (`stop(job, reason)` kills it before its GPUs are freed).
        Returns the jobs changed."""
        s = self.settings
        touched = []
        for job in list(scheduler.active.values()):
            info = infos.get(job.id)
            if job.state is not JobState.RUNNING or info is None or not self._judged(job.id):
                continue
            timeout = info.stall_timeout if info.stall_timeout is not None else s.timeout
            since = info.progress_at if info.progress_at is not None else job.started_at or now
            # Judged on evidence: a report that came `timeout` after the last progress and showed none. A late
            # report is no proof of a stall (a silent runner is the heartbeat timeout's business).
            if not stalled(since, info.reported_at or since, timeout):
                if info.stalled_since is not None:
                    info.stalled_since = None
                    scheduler.events.append(
                        Event(
                            job.id,
                            now,
                            JobState.RUNNING,
                            JobState.RUNNING,
                            f"progress again ({info.progress_why})",
                            ACTOR,
                        )
                    )
                    touched.append(job)
                continue
            if info.stalled_since is None:
                info.stalled_since = now
                what = {"alert": "alerted", "requeue": "requeued", "fail": "failed"}[s.on_stall]
                self.stalls[what] += 1
                reason = f"stalled: no progress for {now - since:.0f} s (stall_timeout {timeout:g} s)"
                scheduler.events.append(Event(job.id, now, JobState.RUNNING, JobState.RUNNING, reason, ACTOR))
                log.warning("job %s %s; on_stall=%s", job.id, reason, s.on_stall)
                touched.append(job)
            if s.on_stall != "alert" and now - info.stalled_since >= s.grace:
                reason = f"stalled: no progress for {now - since:.0f} s; {s.on_stall} by c.GPUSched.on_stall"
                stop(job, reason)
                info.message = reason
                if s.on_stall == "requeue":
                    scheduler.lost(job.id, now, reason)
                else:
                    scheduler.finished(job.id, now, ok=False, reason=reason)
                self.forget(job.id)
                touched.append(job)
        return touched

    def _judged(self, job_id: str) -> bool:
        return any(k[0] == job_id for k in self._mark)


def _figures(now: Activity, before: Activity | None, source: str, exclude_gpu: bool = False) -> dict[str, Any]:
    """What the API shows of the last report: rates over the last window, the running cell."""
    out: dict[str, Any] = {"source": source, "time": now.time}
    if source == "runner":
        out.update(
            execution_state=now.execution_state,
            cell_index=now.cell_index,
            cell_running_s=None if now.cell_started is None else max(0.0, round(now.time - now.cell_started, 1)),
            last_output=now.last_output,
        )
    elapsed = now.time - before.time if before is not None else 0.0
    for name, value, scale in (("cpu_cores", "cpu_seconds", 1.0), ("io_mib_s", "io_bytes", MIB)):
        a, b = (getattr(before, value) if before else None), getattr(now, value)
        out[name] = (
            round(max(0.0, b - a) / elapsed / scale, 2) if a is not None and b is not None and elapsed > 0 else None
        )
    if not exclude_gpu:
        out["gpu_util"] = None if now.gpu_util is None else round(now.gpu_util, 1)
        out["gpu_memory_mib"] = None if now.gpu_memory_mib is None else round(now.gpu_memory_mib)
    return out
