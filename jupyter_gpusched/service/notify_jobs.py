"""Word of a job's start and end to the targets its `notify` field (or its owner's defaults) names.

Built from the events the service writes: a move to RUNNING is "started", a move to SUCCEEDED, FAILED or
CANCELLED is that state's name. Each target's delivery is recorded in the job's info in the store once it
is delivered or given up on (`JobInfo.notified`); on a restart every wanted delivery not recorded is sent
again, so delivery is at-least-once (a receiver tells a repeat by its X-GPUSched-Delivery key). A delivery
given up on after every try is written into the job's events ("notification to X failed after N tries").
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core import Job, JobState
from ..core.model import TERMINAL_STATES, Event
from ..store import Store
from .info import JobInfo
from .notify import Notification, Notifier, NotifySettings
from .notify_targets import Target, parse_targets, targets_from_dicts
from .views import iso

log = logging.getLogger("jupyter_gpusched")
ACTOR = "notify"


def event_name(state: JobState) -> str | None:
    if state is JobState.RUNNING:
        return "started"
    return state.value.lower() if state in TERMINAL_STATES else None


def job_payload(job: Job, info: JobInfo | None) -> dict[str, Any]:
    """The job's public fields, as `GET jobs/{id}` names them."""
    s = job.spec
    return {
        "id": job.id,
        "state": job.state.value,
        "notebook": s.notebook,
        "owner": s.owner,
        "tenant": s.tenant,
        "gpus": s.gpus,
        "priority": s.priority.label,
        "created": iso(job.submitted_at),
        "started": iso(job.first_started_at),
        "finished": iso(job.finished_at),
        "attempts": job.attempts,
        "reason": job.reason,
        "message": info.message if info is not None else "",
    }


class JobNotices:
    def __init__(
        self,
        settings: NotifySettings,
        jobs: Mapping[str, Job],
        info: dict[str, JobInfo],
        store: Store,
        clock: Callable[[], float],
    ):
        self.settings = settings
        self.jobs = jobs
        self.info = info
        self.store = store
        self.clock = clock
        self.notifier = Notifier(settings)

    # --- which targets a new job gets ---------------------------------------------------------
    def targets_for(self, requested: Any, owner: str, tenant: str) -> tuple[Target, ...]:
        """The job's own `notify` (checked; [] turns notices off), else its owner's defaults."""
        if requested is not None:
            return parse_targets(requested, self.settings.channels)
        return self.defaults_for(owner, tenant)[0]

    def defaults_for(self, user: str, tenant: str) -> tuple[tuple[Target, ...], str]:
        """(targets, where from): the user's own setting ("user"), else c.GPUSched.notify_defaults for the user
        ("config:user") or the tenant ("config:tenant"), else none ("none")."""
        own = self.store.user_notify(user)
        if own is not None:
            return targets_from_dicts(own), "user"
        for scope, name in (("users", user), ("tenants", tenant)):
            configured = (self.settings.defaults.get(scope) or {}).get(name)
            if configured is not None:
                return parse_targets(configured), f"config:{scope[:-1]}"
        return (), "none"

    def set_user_defaults(self, user: str, value: Any) -> tuple[Target, ...] | None:
        """A user's own defaults (checked); None forgets them. Jobs already submitted keep their targets."""
        targets = None if value is None else parse_targets(value, self.settings.channels)
        self.store.set_user_notify(user, None if targets is None else [t.to_dict() for t in targets])
        return targets

    def tenant_notice(self, tenant: str, key: str, message: str) -> None:
        """A message about a tenant (a budget warning) to the tenant's configured targets, whatever
        events they name. Sent once: the caller records it first, so a crash mid-send loses it."""
        configured = (self.settings.defaults.get("tenants") or {}).get(tenant)
        for index, target in enumerate(parse_targets(configured) if configured else ()):
            payload = {"tenant": tenant, "message": message}
            self.notifier.send(Notification(target, "budget", f"[gpusched] {message}", payload, f"{key}:{index}"))

    # --- sending, from the events the service writes ------------------------------------------
    def on_events(self, events: Iterable[Event]) -> None:
        for e in events:
            if e.actor != ACTOR and e.src is not e.dst:
                self._send_due(e.job_id)

    def resume(self) -> None:
        """After a restart: send what the store has no record of (at-least-once)."""
        for job_id, info in self.info.items():
            if info.notify:
                self._send_due(job_id)

    def _send_due(self, job_id: str) -> None:
        job, info = self.jobs.get(job_id), self.info.get(job_id)
        if job is None or info is None or not info.notify:
            return
        event = event_name(job.state)
        if event is None:
            return
        for index, target in enumerate(targets_from_dicts(info.notify)):
            key = self.delivery_key(job, event, index)
            if event in target.events and key not in info.notified:
                self.notifier.send(self._notification(job, info, target, event, key))

    @staticmethod
    def delivery_key(job: Job, event: str, index: int) -> str:
        attempt = f".{job.attempts}" if event == "started" else ""  # a requeued job starts again
        return f"{job.id}:{event}{attempt}:{index}"

    def _notification(self, job: Job, info: JobInfo, target: Target, event: str, key: str) -> Notification:
        subject = f"[gpusched] job {job.id} {job.state.value}: {job.spec.notebook}"
        return Notification(target, event, subject, job_payload(job, info), key, job.id)

    # --- outcomes, on the service's tick ------------------------------------------------------
    def settle(self) -> None:
        """Record the deliveries that ended since the last tick; a failure also as a job event."""
        touched: dict[str, JobInfo] = {}
        failures = []
        for outcome in self.notifier.results():
            note = outcome.notification
            job_id = note.job_id
            info = self.info.get(job_id) if job_id else None
            job = self.jobs.get(job_id) if job_id else None
            if info is None or job is None:
                continue
            if note.key not in info.notified:
                info.notified.append(note.key)
            touched[job.id] = info
            if not outcome.delivered:
                why = f"notification to {note.target.label} failed after {outcome.tries} tries: {outcome.error}"
                failures.append(Event(job.id, self.clock(), job.state, job.state, why, ACTOR))
        for job_id, info in touched.items():
            self.store.set_info(job_id, info.to_dict())
        if failures:
            self.store.record(events=failures)

    def close(self) -> None:
        self.notifier.close()
