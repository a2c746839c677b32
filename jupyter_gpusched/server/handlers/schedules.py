"""Recurring schedules: create, list, describe, edit (pause, resume), delete, their runs, a cron preview.

A schedule's body is a POST jobs body (checked by the same code, so job-field errors read the same)
plus `cron`, `timezone`, `paused`, `overlap` and `catch_up`. Access is as for jobs: users see and
edit their own schedules, admins all; someone else's schedule does not exist for you (404).
A schedule that runs a pipeline carries `pipeline: {steps, edges}` (checked as POST pipelines checks
them, errors naming `pipeline.steps[i].field`) instead of the notebook and job fields.
The firing rules are the service's (service/schedules.py).
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ..base import GPUSchedHandler, api_errors
from ..serialize import iso, pipeline_state
from ..validation import ApiError, parse_json_object
from .jobs import checked_submission, page_of_jobs
from .pipelines import checked_pipeline

SCHEDULE_FIELDS = ("cron", "timezone", "paused", "overlap", "catch_up")


def _schedule_options(body: dict[str, Any]) -> dict[str, Any]:
    """The schedule's own fields out of `body` (what is left are job fields); types checked here,
    values (cron, time zone, choices) by the service."""
    out = {k: body.pop(k) for k in SCHEDULE_FIELDS if k in body}
    for name in ("cron", "timezone", "overlap", "catch_up"):
        if name in out and not isinstance(out[name], str):
            raise ApiError(400, "wrong_type", f"{name} must be a string, not {type(out[name]).__name__}", name)
    if "paused" in out and not isinstance(out["paused"], bool):
        raise ApiError(400, "wrong_type", "paused must be true or false", "paused")
    return out


class ScheduleAccess(GPUSchedHandler):
    def schedule_or_404(self, schedule_id: str) -> dict[str, Any]:
        row = self.service.schedules.store.get(schedule_id)
        if row is None or (not self.is_admin and row["owner"] != self.user_name):
            raise ApiError(404, "not_found", f"no schedule {schedule_id!r}", "id")  # others' do not exist for you
        return row

    def schedule_json(self, row: dict[str, Any]) -> dict[str, Any]:
        schedules = self.service.schedules
        last = schedules.last_run(row)
        if row["pipeline"]:
            last_state = pipeline_state(last) if last else None
        else:
            last_state = last[0].state.value if last else None
        return {
            "id": row["id"],
            "owner": row["owner"],
            "tenant": schedules.service.tenant_for(row["owner"], row["tenant"]),
            "notebook": row["notebook"],
            "cron": row["cron"],
            "timezone": row["timezone"],
            "paused": row["paused"],
            "overlap": row["overlap"],
            "catch_up": row["catch_up"],
            "job": row["job"],
            "pipeline": row["pipeline"],
            "created": iso(row["created_at"]),
            "next_run": iso(schedules.next_run(row)),
            "last_run": iso(row["last_run_at"]),
            "last_job": row["last_job"],
            "last_state": last_state,
            "note": row["note"],
        }

    def job_fields(self, body: dict[str, Any]) -> tuple[str, str | None, dict[str, Any]]:
        """(notebook, tenant, other job fields) from a job body, checked as POST jobs checks it."""
        args = checked_submission(self, body)
        return args.pop("notebook"), args.pop("tenant"), args

    def pipeline_fields(self, pipeline: Any, rest: dict[str, Any]) -> dict[str, Any]:
        """A schedule's `pipeline` ({steps, edges}, checked as POST pipelines checks them); job fields
        beside it are refused (each step has its own)."""
        if rest:
            field = sorted(rest)[0]
            raise ApiError(400, "unknown_field", f"{field}: a pipeline schedule's job fields go in its steps", field)
        if not isinstance(pipeline, dict) or set(pipeline) - {"steps", "edges"}:
            raise ApiError(400, "invalid_value", "pipeline must be an object with steps and edges", "pipeline")
        steps, edges = checked_pipeline(self, pipeline.get("steps"), pipeline.get("edges", []), "pipeline.")
        return {"steps": steps, "edges": edges}


class SchedulesHandler(ScheduleAccess):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        owner = self.user_name if (self._bool_arg("mine", False) or not self.is_admin) else None
        self.finish({"schedules": [self.schedule_json(r) for r in self.service.schedules.all(owner)]})

    @web.authenticated
    @authorized
    @api_errors
    async def post(self):
        body = parse_json_object(self.request.body)
        options = _schedule_options(body)
        if "cron" not in options:
            raise ApiError(400, "missing_field", "cron is required, e.g. '0 2 * * *' (every day at 02:00)", "cron")
        if "pipeline" in body:
            pipeline = self.pipeline_fields(body.pop("pipeline"), body)
            row = self.service.schedules.create(owner=self.user_name, pipeline=pipeline, **options)
        else:
            notebook, tenant, job = self.job_fields(body)
            row = self.service.schedules.create(
                owner=self.user_name, notebook=notebook, tenant=tenant, job=job, **options
            )
        self.set_status(201)
        self.set_header("Location", url_path_join(self.base_url, "gpusched/api/schedules", row["id"]))
        self.finish(self.schedule_json(row))


class ScheduleHandler(ScheduleAccess):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, schedule_id: str):
        self.finish(self.schedule_json(self.schedule_or_404(schedule_id)))

    @web.authenticated
    @authorized
    @api_errors
    async def patch(self, schedule_id: str):
        """Change any of the schedule's fields or job fields; the others stay."""
        row = self.schedule_or_404(schedule_id)
        body = parse_json_object(self.request.body)
        changes = _schedule_options(body)
        if row["pipeline"] or "pipeline" in body:  # a pipeline schedule stays one: a new pipeline replaces it
            if "pipeline" in body:
                changes["pipeline"] = self.pipeline_fields(body.pop("pipeline"), body)
                changes.update(notebook="", tenant=None, job={})
            elif body:
                self.pipeline_fields(row["pipeline"], body)  # refuses the job fields
        elif body:  # job fields: merged onto the schedule's and checked again as a whole
            merged = {**row["job"], "notebook": row["notebook"], **body}
            merged = {k: v for k, v in merged.items() if v is not None or k in body}
            if row["tenant"] is not None and "tenant" not in body:
                merged["tenant"] = row["tenant"]
            notebook, tenant, job = self.job_fields(merged)
            changes.update(notebook=notebook, tenant=tenant, job=job)
        self.finish(self.schedule_json(self.service.schedules.update(schedule_id, **changes)))

    @web.authenticated
    @authorized
    @api_errors
    async def delete(self, schedule_id: str):
        """Delete the schedule; its runs stay (as ordinary jobs)."""
        row = self.schedule_or_404(schedule_id)
        self.service.schedules.delete(schedule_id)
        self.finish(self.schedule_json(dict(row, paused=True)))


class ScheduleJobsHandler(ScheduleAccess):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, schedule_id: str):
        self.schedule_or_404(schedule_id)
        self.finish(page_of_jobs(self, self.service.schedules.jobs(schedule_id)))


class SchedulePreviewHandler(ScheduleAccess):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """`?cron=&timezone=`: the expression in words and its next 5 run times."""
        preview = self.service.schedules.preview(
            self.get_query_argument("cron", ""), self.get_query_argument("timezone", "UTC")
        )
        self.finish(dict(preview, next_runs=[iso(t) for t in preview["next_runs"]]))
