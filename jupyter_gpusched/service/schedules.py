"""Recurring schedules: fire each schedule's runs as ordinary jobs, on the service's tick.

A schedule is a notebook + job fields + a cron expression in a time zone (core/cron.py, DST-correct).
Each tick, a schedule that is not paused and whose next scheduled time has come submits one job.

- **Never twice.** A run's job id is derived from (schedule id, scheduled time), and a slot whose job
  already exists is not submitted again: a server that stops between submitting the job (durable
  first) and recording `last_run_at` finds the job on restart and only records the slot.
- **Missed runs** (the server was down, or the tick came more than `MISFIRE_GRACE` late) follow the
  schedule's `catch_up`: `once` (default) runs once for all the missed times, at once, as the latest
  missed slot; `skip` runs none of them and waits for the next scheduled time.
- **Overlap**: if the schedule's previous run is still queued or running at the next time, `overlap`
  `skip` (default) skips this time (the note says so), `queue` submits it anyway (it queues behind).
- **Pipelines.** A schedule may run a whole pipeline (`pipeline`: steps + edges) instead of a notebook:
  each run submits every step at once (Service.submit_pipeline), the pipeline id derived from
  (schedule id, scheduled time) and the steps' ids from it, so a slot fires once across restarts too;
  `last_job` is the run's pipeline id, and the overlap rule looks at all of its steps.
- A run the scheduler refuses (its notebook was deleted, a tenant removed) is not retried: the
  schedule's `note` says why, and the next scheduled time tries again.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core import Job, SpecError
from ..core.cron import check_cron, latest_due, next_runs, runs_after, zone
from ..core.dependencies import check_edges
from .errors import InvalidArgument, NotFound
from .views import iso

if TYPE_CHECKING:  # pragma: no cover
    from .loop import Service

log = logging.getLogger("jupyter_gpusched")

OVERLAPS = ("skip", "queue")
CATCH_UPS = ("once", "skip")
MISFIRE_GRACE = 60.0  # seconds late a scheduled time may fire and still count as on time
DEFAULT_RUN_S = 3600.0  # the expected length of a run without max_runtime, for known future demand


def run_job_id(schedule_id: str, slot: float) -> str:
    """The job id of a schedule's run at `slot`: the same on every server, so a run is keyed on its slot."""
    return hashlib.sha256(f"{schedule_id}@{slot:.0f}".encode()).hexdigest()[:12]


def _choice(field: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise InvalidArgument(f"{field} must be one of {', '.join(allowed)}, not {str(value)[:40]!r}", field)
    return value


class Schedules:
    """The schedules of one service (its store's `schedules` table)."""

    def __init__(self, service: Service, clock: Callable[[], float]):
        self.service = service
        self.store = service.store.schedules
        self.clock = clock

    # --- what the handlers call ----------------------------------------------------------------
    def create(
        self,
        *,
        owner: str,
        cron: str,
        notebook: str = "",
        pipeline: dict[str, Any] | None = None,
        timezone: str = "UTC",
        tenant: str | None = None,
        job: dict[str, Any] | None = None,
        paused: bool = False,
        overlap: str = "skip",
        catch_up: str = "once",
    ) -> dict[str, Any]:
        self.service.require_owner()
        cron, timezone = self._when(cron, timezone)
        if (pipeline is None) == (not notebook):
            raise InvalidArgument("a schedule runs either a notebook or a pipeline", "pipeline")
        self._check_pipeline(pipeline)
        self._check_notify(job)
        row = self.store.add(
            dict(
                id=uuid.uuid4().hex[:12],
                owner=owner,
                tenant=tenant,
                notebook=notebook,
                cron=cron,
                timezone=timezone,
                job=dict(job or {}),
                pipeline=pipeline,
                paused=bool(paused),
                overlap=_choice("overlap", overlap, OVERLAPS),
                catch_up=_choice("catch_up", catch_up, CATCH_UPS),
                created_at=self.clock(),
                last_run_at=None,
                last_job=None,
                note="",
            )
        )
        what = f"a {len(pipeline['steps'])}-step pipeline" if pipeline else notebook
        log.info("schedule %s: %s every %r (%s) for %s", row["id"], what, cron, timezone, owner)
        return row

    def get(self, schedule_id: str) -> dict[str, Any]:
        row = self.store.get(schedule_id)
        if row is None:
            raise NotFound(f"no schedule {schedule_id!r}", "id")
        return row

    def all(self, owner: str | None = None) -> list[dict[str, Any]]:
        return self.store.all(owner)

    def update(self, schedule_id: str, **changes: Any) -> dict[str, Any]:
        """Edit a schedule (pause, resume, a new cron, job fields). Resuming does not fire the times it
        was paused for: the schedule counts from now."""
        self.service.require_owner()
        row = self.get(schedule_id)
        if "cron" in changes or "timezone" in changes:
            changes["cron"], changes["timezone"] = self._when(
                changes.get("cron", row["cron"]), changes.get("timezone", row["timezone"])
            )
        self._check_notify(changes.get("job"))
        self._check_pipeline(changes.get("pipeline"))
        for field, allowed in (("overlap", OVERLAPS), ("catch_up", CATCH_UPS)):
            if field in changes:
                _choice(field, changes[field], allowed)
        if row["paused"] and changes.get("paused") is False or "cron" in changes:
            changes["last_run_at"] = self.clock()  # count from now, not from before the pause / old cron
        return self.store.update(schedule_id, **changes) or self.get(schedule_id)

    def delete(self, schedule_id: str) -> None:
        """Delete the schedule; its runs stay as ordinary jobs (a queued or running one is not cancelled)."""
        self.service.require_owner()
        if not self.store.delete(schedule_id):
            raise NotFound(f"no schedule {schedule_id!r}", "id")

    def jobs(self, schedule_id: str) -> list[Job]:
        """Its runs' jobs (a pipeline schedule's: every step of every run)."""
        return [j for j in self.service.jobs() if j.spec.schedule_id == schedule_id]

    def last_run(self, row: dict[str, Any]) -> list[Job]:
        """The jobs of the schedule's last run: its job, or its pipeline's steps in step order."""
        if not row["last_job"]:
            return []
        if row["pipeline"]:
            steps = (j for j in self.service.scheduler.jobs.values() if j.spec.pipeline_id == row["last_job"])
            return sorted(steps, key=lambda j: j.seq)
        job = self.service.scheduler.jobs.get(row["last_job"])
        return [job] if job is not None else []

    def next_run(self, row: dict[str, Any]) -> float | None:
        if row["paused"]:
            return None
        base = max(self._base(row), self.clock() - MISFIRE_GRACE)
        return next(runs_after(row["cron"], row["timezone"], base))

    def preview(self, cron: str, timezone: str, count: int = 5) -> dict[str, Any]:
        """A cron expression in words and its next run times (for the lab's form)."""
        cron, timezone = self._when(cron, timezone)
        from cron_descriptor import get_description  # only the preview needs it

        return {
            "cron": cron,
            "timezone": timezone,
            "description": f"{get_description(cron)} ({timezone} time)",
            "next_runs": next_runs(cron, timezone, self.clock(), count),
        }

    # --- the tick ------------------------------------------------------------------------------
    def fire_due(self, now: float) -> list[Job]:
        """Submit the runs whose time has come (one per schedule per tick at most)."""
        fired = []
        for row in self.store.all():
            if row["paused"]:
                continue
            try:
                job = self._fire(row, now)
            except Exception:  # one broken schedule must not stop the others, nor the tick
                log.exception("schedule %s could not fire", row["id"])
                continue
            if job is not None:
                fired.append(job)
        return fired

    def _fire(self, row: dict[str, Any], now: float) -> Job | None:
        slot, count = latest_due(row["cron"], row["timezone"], self._base(row), now)
        if slot is None:
            return None
        missed = count > 1 or now - slot > MISFIRE_GRACE
        if missed and row["catch_up"] == "skip":
            self._record(row, slot, None, f"skipped {count} missed run(s) (catch_up: skip)")
            return None
        note = f"one run for {count} missed time(s) (catch_up: once)" if missed else ""
        active = [j for j in self.last_run(row) if not j.state.terminal]
        if active and row["overlap"] == "skip":
            previous = active[0]
            self._record(row, slot, row["last_job"], f"skipped: run {previous.id} is still {previous.state.value}")
            return None
        run_id = run_job_id(row["id"], slot)
        try:
            job = self._submit_run(row, run_id)
        except SpecError as err:
            self._record(row, slot, row["last_job"], f"could not submit: {err.message}")
            return None
        self._record(row, slot, run_id, note)
        return job

    def _submit_run(self, row: dict[str, Any], run_id: str) -> Job:
        """Submit the run `run_id` (a job, or a pipeline's steps: then its first step is returned), unless
        it exists: submitted before a restart that came before the slot was recorded."""
        jobs = self.service.scheduler.jobs
        if row["pipeline"]:
            done = [j for j in jobs.values() if j.spec.pipeline_id == run_id]
            if done:
                return min(done, key=lambda j: j.seq)
            steps = [dict(step, schedule_id=row["id"]) for step in row["pipeline"]["steps"]]
            edges = row["pipeline"].get("edges") or []
            return self.service.submit_pipeline(steps, edges, owner=row["owner"], pipeline_id=run_id)[1][0]
        job = jobs.get(run_id)
        if job is not None:
            return job
        return self.service.submit(
            owner=row["owner"],
            notebook=row["notebook"],
            tenant=row["tenant"],
            schedule_id=row["id"],
            job_id=run_id,
            **row["job"],
        )

    def _record(self, row: dict[str, Any], slot: float, job_id: str | None, note: str) -> None:
        self.store.update(row["id"], last_run_at=slot, last_job=job_id, note=note)
        if note:
            log.info("schedule %s: %s", row["id"], note)

    # --- known future demand -------------------------------------------------------------------
    def upcoming(self, now: float, horizon: float) -> list[dict[str, Any]]:
        """The runs due in (now, now + horizon]: time, schedule, tenant, gpus, expected seconds
        (max_runtime, else DEFAULT_RUN_S)."""
        out: list[dict[str, Any]] = []
        for row in self.store.all():
            if row["paused"]:
                continue
            tenant = self.service.tenant_for(row["owner"], row["tenant"])
            # a pipeline: its widest step's GPUs for its steps' summed lengths (branches run side by side)
            steps = row["pipeline"]["steps"] if row["pipeline"] else [row["job"]]
            expected = sum(step.get("max_runtime") or DEFAULT_RUN_S for step in steps)
            gpus = max(step.get("gpus", 1) for step in steps)
            for when in runs_after(row["cron"], row["timezone"], now):
                if when > now + horizon or len(out) > 10_000:
                    break
                out.append(dict(time=when, schedule=row["id"], tenant=tenant, gpus=gpus, seconds=expected))
        return sorted(out, key=lambda r: r["time"])

    def known_demand(self, now: float, horizon: float, step: float, tenant: str | None = None) -> dict[str, Any]:
        """The GPUs the scheduled runs of (now, now + horizon] will ask for, per tenant, per `step`-second
        bucket from the current one: each run counts its GPUs in every bucket from its scheduled time for
        its expected length (max_runtime, else DEFAULT_RUN_S). Queueing delay is not modelled."""
        first = int(now // step)
        buckets = max(1, int(horizon // step))
        gpus: dict[str, list[int]] = {}
        runs = [r for r in self.upcoming(now, horizon) if tenant is None or r["tenant"] == tenant]
        for run in runs:
            row = gpus.setdefault(run["tenant"], [0] * buckets)
            start = int(run["time"] // step) - first
            end = math.ceil((run["time"] + run["seconds"]) / step) - 1 - first  # the last bucket it reaches into
            for b in range(max(start, 0), min(end, buckets - 1) + 1):
                row[b] += run["gpus"]
        return {
            "step_s": step,
            "times": [iso((first + b) * step) for b in range(buckets)],
            "gpus": gpus,
            "runs": [dict(r, time=iso(r["time"])) for r in runs],
        }

    # --- helpers -------------------------------------------------------------------------------
    @staticmethod
    def _when(cron: str, timezone: str) -> tuple[str, str]:
        try:
            zone(timezone)
            return check_cron(cron), timezone
        except ValueError as err:
            raise InvalidArgument(getattr(err, "message", str(err)), getattr(err, "field", "cron")) from None

    @staticmethod
    def _check_pipeline(pipeline: dict[str, Any] | None) -> None:
        """A pipeline's shape and edges (a cycle: 400 naming `pipeline.edges`); its steps' job fields are
        the handler's to check, as for POST pipelines."""
        if pipeline is None:
            return
        steps = pipeline.get("steps")
        if not isinstance(steps, list) or not steps or not all(isinstance(s, dict) for s in steps):
            raise InvalidArgument("pipeline.steps must be a list of job submissions", "pipeline.steps")
        try:
            check_edges(len(steps), pipeline.get("edges") or [])
        except ValueError as exc:
            raise InvalidArgument(str(exc), "pipeline.edges") from None

    def _check_notify(self, job: dict[str, Any] | None) -> None:
        """A bad `notify` target is refused now (400 naming `notify`), not at each run."""
        if job and job.get("notify") is not None:
            self.service.notices.targets_for(job["notify"], "", "")

    @staticmethod
    def _base(row: dict[str, Any]) -> float:
        """Scheduled times after this one are still to come."""
        return row["last_run_at"] if row["last_run_at"] is not None else row["created_at"]
