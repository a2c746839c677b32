"""Jobs: submit, list, describe, cancel, history, log, executed notebook."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ...core import JobState
from ..base import GPUSchedHandler, api_errors
from ..serialize import iso, job_json
from ..validation import ApiError, check_gpu_type, parse_json_object, parse_submit, resolve_notebook

STATES = {s.value for s in JobState}
DEFAULT_PAGE = 1000  # jobs per list response unless ?limit= says otherwise
MAX_PAGE = 10000


class JobsHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        state = self.get_query_argument("state", None)
        if state is not None and state.upper() not in STATES:
            raise ApiError(
                400, "invalid_value", f"unknown state {state!r}; use one of {', '.join(sorted(STATES))}", "state"
            )
        mine = self._bool_arg("mine", False)
        owner = self.user_name if (mine or not self.is_admin) else None
        limit = self._int_arg("limit", DEFAULT_PAGE, 1, MAX_PAGE)
        offset = self._int_arg("offset", 0, 0, None)
        jobs = self.service.jobs(
            state=state.upper() if state else None, tenant=self.get_query_argument("tenant", None), owner=owner
        )
        page = jobs[offset : offset + limit]
        self.finish(
            {
                "jobs": [job_json(self.service, j) for j in page],
                "total": len(jobs),
                "next_offset": offset + limit if offset + limit < len(jobs) else None,
            }
        )

    @web.authenticated
    @authorized
    @api_errors
    async def post(self):
        args = parse_submit(parse_json_object(self.request.body))
        pools = self.service.scheduler.cluster.pools.values()
        check_gpu_type(args["gpu_type"], {p.gpu_type for p in pools if p.gpu_type})
        root = self.notebook_root()
        args["notebook"] = resolve_notebook(root, args["notebook"])
        if self.multi_user:  # the service has no single root: keep the full path in the user's folder
            args["notebook"] = str(root.resolve() / args["notebook"])
        args["tenant"] = self.check_tenant(args["tenant"])
        job = self.service.submit(owner=self.user_name, **args)
        self.set_status(201)
        self.set_header("Location", url_path_join(self.base_url, "gpusched/api/jobs", job.id))
        self.finish(job_json(self.service, job, detail=True))


class JobHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        self.finish(job_json(self.service, self.job_or_404(job_id), detail=True))

    @web.authenticated
    @authorized
    @api_errors
    async def delete(self, job_id: str):
        job = self.job_or_404(job_id)
        if job.state.terminal:
            raise ApiError(409, "conflict", f"job {job_id} already ended ({job.state.value}); nothing to cancel", "id")
        self.service.cancel(job_id, actor=self.user_name)
        self.finish(job_json(self.service, job, detail=True))


class JobEventsHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        self.job_or_404(job_id)
        events = [
            {
                "time": iso(e.time),
                "from": e.src.value if e.src else None,
                "to": e.dst.value,
                "reason": e.reason,
                "actor": e.actor,
            }
            for e in self.service.events(job_id)
        ]
        self.finish({"events": events})


class JobLogHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        """The job's log as text. `?offset=N` returns only what follows byte N, so a client
        can follow a running job; the X-Log-Offset header gives the next offset."""
        self.job_or_404(job_id)
        try:
            offset = int(self.get_query_argument("offset", "0"))
        except ValueError:
            raise ApiError(400, "wrong_type", "offset must be a whole number of bytes", "offset") from None
        if offset < 0:
            raise ApiError(400, "invalid_value", "offset must be 0 or more", "offset")
        path = self.service.log_file(job_id)
        data = b""
        if path.is_file():
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
        self.set_header("X-Log-Offset", str(offset + len(data)))
        self.finish(data, set_content_type="text/plain; charset=utf-8")


class JobOutputHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        job = self.job_or_404(job_id)
        path = self.service.output_file(job_id)
        if not path.is_file():
            raise ApiError(
                409 if not job.state.terminal else 404,
                "not_ready" if not job.state.terminal else "not_found",
                f"job {job_id} has no executed notebook yet (it is {job.state.value})"
                if not job.state.terminal
                else f"job {job_id} ended ({job.state.value}) without an executed notebook",
                "id",
            )
        self.set_header("Content-Disposition", f'attachment; filename="{job_id}.ipynb"')
        with open(path, "rb") as f:
            self.finish(f.read(), set_content_type="application/x-ipynb+json")
