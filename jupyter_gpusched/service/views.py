"""What the edges read from the live service: jobs, their files, queues, the cluster, the usage history.

Read-only: nothing here changes a job. `ServiceViews` is a part of `Service` (loop.py), kept
apart so the loop stays about scheduling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..backends.base import Backend, log_path, output_path
from ..core import Job, JobState, Scheduler
from ..store import Store
from .budgets import Budgets
from .errors import JobNotFound
from .info import JobInfo


def iso(t: float | None) -> str | None:
    """Epoch seconds as the API writes times (UTC, milliseconds)."""
    return None if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


class ServiceViews:
    # set by Service.__init__
    scheduler: Scheduler
    store: Store
    backend: Backend
    info: dict[str, JobInfo]
    jobs_dir: Path
    clock: Callable[[], float]
    budgets: Budgets
    estimator: ThreadPoolExecutor  # one thread: the forward runs of `estimated_start`

    def get(self, job_id: str) -> Job:
        job = self.scheduler.jobs.get(job_id)
        if job is None:
            raise JobNotFound(job_id)
        return job

    def jobs(self, *, state: str | None = None, tenant: str | None = None, owner: str | None = None) -> list[Job]:
        out = []
        for job in self.scheduler.jobs.values():
            if state is not None and job.state.value != state:
                continue
            if tenant is not None and job.tenant != tenant:
                continue
            if owner is not None and job.spec.owner != owner:
                continue
            out.append(job)
        out.sort(key=lambda j: j.seq, reverse=True)  # newest first
        return out

    def events(self, job_id: str):
        self.get(job_id)
        return self.store.events(job_id)

    def job_dir(self, job_id: str) -> Path:
        info = self.info.get(self.get(job_id).id)
        return Path(info.job_dir) if info is not None and info.job_dir else self.jobs_dir / job_id

    def log_file(self, job_id: str) -> Path:
        return log_path(self.job_dir(job_id))

    def output_file(self, job_id: str) -> Path:
        return output_path(self.job_dir(job_id))

    def position(self, job: Job) -> int | None:
        if self.backend.admission != "core":  # another system's line (Kueue): its order, not ours
            status = self.backend.queue_status(job.id)
            return None if status is None else status[0]
        return self.scheduler.position(job.id)

    async def estimated_start(self, job: Job) -> float | None:
        """When a queued job should start (`Scheduler.estimate_start`), without holding up the event
        loop: the copy of the scheduler is taken here, on the loop, where nothing changes it meanwhile;
        the forward run, up to seconds on a loaded cluster, goes on in the estimates thread. One
        thread: a run is resumed by the next question, so two must not run it at once."""
        if self.backend.admission != "core" or job.state is not JobState.QUEUED:
            return None  # (when another system admits, we cannot tell)
        now = self.clock()
        run = self.scheduler.lookahead(now)
        return await asyncio.get_running_loop().run_in_executor(self.estimator, run.estimate, job.id, now)

    def usage(self, minutes: int, tenant: str | None = None) -> dict[str, Any]:
        """GPU demand history over the last `minutes`, as aligned per-tenant series."""
        since = int(self.clock() // 60) - minutes + 1
        rows = self.store.usage(tenant=tenant, since_minute=since)
        stamps = sorted({m for m, _, _, _ in rows})
        index = {m: i for i, m in enumerate(stamps)}
        series: dict[str, dict[str, list[int]]] = {}
        for m, t, requested, allocated in rows:
            s = series.setdefault(t, {"requested": [0] * len(stamps), "allocated": [0] * len(stamps)})
            s["requested"][index[m]] = requested
            s["allocated"][index[m]] = allocated
        return {"minutes": [m * 60.0 for m in stamps], "tenants": series}

    def gpu_hours_by_tenant(self) -> dict[str, dict[str, float]]:
        """Per tenant, the GPU-hours the stall watch's reports covered ("allocated"), of which its GPUs were
        idle ("idle") and of which its jobs waited on data ("waiting_on_data"); every job, ended ones too."""
        out = {t: {"allocated": 0.0, "idle": 0.0, "waiting_on_data": 0.0} for t in self.scheduler.ledger.tenants}
        for job in self.scheduler.jobs.values():
            info = self.info.get(job.id)
            if info is None or not info.gpu_s:
                continue
            row = out.setdefault(job.tenant, {"allocated": 0.0, "idle": 0.0, "waiting_on_data": 0.0})
            row["allocated"] += info.gpu_s / 3600
            row["idle"] += info.idle_gpu_s / 3600
            row["waiting_on_data"] += info.data_wait_gpu_s / 3600
        return {t: {k: round(v, 4) for k, v in row.items()} for t, row in out.items()}

    def queues(self) -> dict[str, dict]:
        view = self.scheduler.queues_view()
        for name, row in view.items():
            row["budget"] = self.budgets.bar(name)  # None: no budget
        return view

    def cluster(self) -> dict[str, Any]:
        c = self.scheduler.cluster
        nodes: list[dict[str, Any]] = []
        fenced = 0
        for name in c.node_names:
            fenced += len(c.fenced_on(name))
            nodes.append(
                {
                    "name": name,
                    "pool": c.pool_of(name),
                    "gpus": c.capacity(name),
                    "free": c.free_on(name),
                    "fenced": list(c.fenced_on(name)),
                    "jobs": sorted(self.scheduler.on_node.get(name, ())),
                }
            )
        allocated = c.total_gpus - c.free_gpus - fenced
        return {
            "backend": self.backend.name,
            "policy": self.scheduler.policy.name,
            "total_gpus": c.total_gpus,
            "free_gpus": c.free_gpus,
            "allocated_gpus": allocated,
            "utilization": allocated / c.total_gpus if c.total_gpus else 0.0,
            "nodes": nodes,
            "pools": [
                {
                    "name": p.name,
                    "spot": p.spot,
                    "price_per_gpu_hour": p.price_per_gpu_hour,
                    "gpu_type": p.gpu_type,
                    "gpu_memory_mib": p.gpu_memory_mib,
                }
                for p in c.pools.values()
            ],
        }
