"""Pipelines: submit a DAG of notebook jobs at once, and read its steps' states (docs/pipelines.md)."""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ...service import JobNotFound
from ..base import GPUSchedHandler, api_errors
from ..serialize import pipeline_json
from ..validation import ApiError, parse_json_object
from .jobs import checked_submission

MAX_STEPS = 100


def checked_pipeline(handler: GPUSchedHandler, steps: Any, edges: Any, prefix: str = "") -> tuple[list[dict], list]:
    """A pipeline's steps checked as POST jobs checks a job (400 naming `<prefix>steps[i].field`) and its
    edges' shape (the service refuses cycles): (the steps' Service.submit arguments, the edges).
    Schedules that run a pipeline check theirs with it too (prefix `pipeline.`)."""
    if not isinstance(steps, list) or not steps or len(steps) > MAX_STEPS:
        raise ApiError(
            400, "invalid_value", f"steps must be a list of 1 to {MAX_STEPS} job submissions", f"{prefix}steps"
        )
    if not isinstance(edges, list):
        raise ApiError(400, "invalid_value", "edges must be a list of [from, to] step indices", f"{prefix}edges")
    checked = []
    for i, step in enumerate(steps):
        field = f"{prefix}steps[{i}]"
        if not isinstance(step, dict):
            raise ApiError(400, "invalid_value", f"step {i} is not a job submission object", field)
        if "after" in step:  # within a pipeline the edges say what waits for what
            raise ApiError(400, "unknown_field", f"step {i}: use edges, not after", f"{field}.after")
        try:
            args = checked_submission(handler, step)
        except ApiError as err:
            raise ApiError(err.status, err.error, f"step {i}: {err.message}", f"{field}.{err.field}") from None
        args.pop("after")
        checked.append(args)
    return checked, edges


class PipelinesHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def post(self):
        body = parse_json_object(self.request.body)
        unknown = sorted(set(body) - {"steps", "edges"})
        if unknown:
            raise ApiError(
                400, "unknown_field", f"unknown field {unknown[0]!r}; allowed fields: edges, steps", unknown[0]
            )
        checked, edges = checked_pipeline(self, body.get("steps"), body.get("edges", []))
        pipeline_id, jobs = self.service.submit_pipeline(checked, edges, owner=self.user_name)
        self.set_status(201)
        self.set_header("Location", url_path_join(self.base_url, "gpusched/api/pipelines", pipeline_id))
        self.finish(pipeline_json(self.service, pipeline_id, jobs))


class PipelineHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, pipeline_id: str):
        try:
            steps = self.service.pipeline(pipeline_id)
        except JobNotFound:
            steps = []
        if not steps or not all(self.may_see(job) for job in steps):
            raise ApiError(404, "not_found", f"no pipeline {pipeline_id!r}", "id")
        self.finish(pipeline_json(self.service, pipeline_id, steps))
