"""When another system admits (Kueue): hand queued jobs over, and book the admissions it makes.

Under a backend whose `admission` is not "core" the scheduler runs `policies.external`, whose pass decides
nothing. Each tick this hands every queued job to the backend (`launch` with no allocation: on Kubernetes, a
suspended Job in the tenant's LocalQueue), mirrors the other system's reason and the tenants' quotas, and
withdraws the jobs cancelled while they waited. A `started` update that says where the job's pods run
(`placed`) is booked as an admission first (`Scheduler.admit_observed`), then handled as usual. A job that is
preempted there comes back to the queue here and is handed over again (the backend keeps its Job).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..backends.base import BackendError, BackendUpdate, LaunchRefused
from ..core import Job, JobState

if TYPE_CHECKING:
    from .loop import Service

log = logging.getLogger("jupyter_gpusched")

TENANT_REFRESH = 5.0  # seconds between reads of the other system's quotas
RETRY_PAUSE = 5.0  # seconds before a hand-over the backend refused is tried again
REASON_REFRESH = 1.0  # seconds between mirrorings of the other system's reasons (a lookup per queued job)


class Handover:
    def __init__(self, service: Service):
        self.service = service
        self.handed: dict[str, int] = {}  # job id -> its `attempts` when handed over
        self._retry_at: dict[str, float] = {}
        self._tenants_at = self._reasons_at = float("-inf")

    def tick(self, now: float) -> list[Job]:
        """Hand over what waits, withdraw what was cancelled, mirror reasons; the jobs whose record changed."""
        s, backend = self.service.scheduler, self.service.backend
        if now - self._tenants_at >= TENANT_REFRESH:
            self._tenants_at = now
            for tenant in backend.tenants() or ():
                if s.ledger.tenants.get(tenant.name) != tenant:
                    s.set_tenant(tenant)
        touched: list[Job] = []
        for job_id in [j for j in self.handed if s.jobs[j].state.terminal]:
            job = s.jobs[job_id]
            del self.handed[job_id]
            if job.state is JobState.CANCELLED and not job.started_at:
                self.service.kills.start(job_id, "cancelled", ())  # withdrawn while it waited there
        mirror = now - self._reasons_at >= REASON_REFRESH
        if mirror:
            self._reasons_at = now
        for job in list(s.queue):
            if self.handed.get(job.id) == job.attempts:
                if not mirror:
                    continue
                status = backend.queue_status(job.id)
                if status is not None and status[1] and status[1] != job.reason:
                    job.reason = status[1]
                    touched.append(job)
            elif now >= self._retry_at.get(job.id, now):
                self._hand(job, now, touched)
        return touched

    def _hand(self, job: Job, now: float, touched: list[Job]) -> None:
        try:
            self.service.backend.launch(self.service.launch_request(job, now))
        except LaunchRefused as exc:
            log.warning("job %s can never start: %s", job.id, exc)
            self.service.scheduler.finished(job.id, now, ok=False, reason=f"could not start: {exc}")
        except (BackendError, OSError) as exc:
            log.warning("could not hand job %s over, again in %g s: %s", job.id, RETRY_PAUSE, exc)
            self._retry_at[job.id] = now + RETRY_PAUSE
            job.reason = f"could not hand it over: {exc}"
        else:
            self.handed[job.id] = job.attempts
            self._retry_at.pop(job.id, None)
            job.reason = f"handed to {self.service.backend.admission}"
        touched.append(job)

    def observed(self, u: BackendUpdate) -> None:
        """Book the admission a `started` update reports for a job still queued here."""
        if u.kind != "started" or u.placed is None:
            return
        s = self.service.scheduler
        job = s.jobs.get(u.job_id)
        if job is None or job.state is not JobState.QUEUED or self.handed.get(job.id) != job.attempts:
            return
        where = ", ".join(f"{n} ({g} GPUs)" for n, g in sorted(u.placed.items()))
        s.admit_observed(job.id, u.placed, u.time, f"admitted by {self.service.backend.admission} on {where}")
