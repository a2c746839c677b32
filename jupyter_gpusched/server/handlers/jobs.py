"""Jobs: submit, list, describe, cancel, history, log, executed notebook."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web

from ...core import JobState
from ..base import GPUSchedHandler, api_errors
from ..job_query import check_sort, match_text, sort_jobs
from ..serialize import iso, job_detail_json, job_json
from ..streaming import file_size, send_file, start_range
from ..validation import ApiError, check_gpu_type, parse_json_object, parse_submit, resolve_notebook

STATES = {s.value for s in JobState}
DEFAULT_PAGE = 1000  # jobs per list response unless ?limit= says otherwise
MAX_PAGE = 10000
MAX_LOG_READ = 4 * 1024 * 1024  # bytes of log per response (default and maximum of ?length=)


def page_of_jobs(handler: GPUSchedHandler, jobs: list) -> dict:
    """One page (?limit=, ?offset=) of a job list, as GET jobs answers."""
    limit = handler._int_arg("limit", DEFAULT_PAGE, 1, MAX_PAGE)
    offset = handler._int_arg("offset", 0, 0, None)
    page = jobs[offset : offset + limit]
    return {
        "jobs": [job_json(handler.service, j) for j in page],
        "total": len(jobs),
        "next_offset": offset + limit if offset + limit < len(jobs) else None,
    }


def checked_submission(handler: GPUSchedHandler, body: dict, interactive_ok: bool = False) -> dict:
    """A submit body checked as POST jobs checks it (shape, GPU type, notebook, tenant): Service.submit's
    keyword arguments, less the owner. Schedules and pipelines check their job fields with it too: a GPU
    kernel's reservation (`interactive`) is only for POST jobs (`interactive_ok`)."""
    args = parse_submit(body)
    if args.get("interactive") and not interactive_ok:
        raise ApiError(
            400, "invalid_value", "only a GPU kernel's own request (POST jobs) is interactive", "interactive"
        )
    pools = handler.service.scheduler.cluster.pools.values()
    check_gpu_type(args["gpu_type"], {p.gpu_type for p in pools if p.gpu_type})
    if not args.get("interactive"):  # a kernel's reservation runs no notebook: its label is no path
        root = handler.notebook_root()
        args["notebook"] = resolve_notebook(root, args["notebook"])
        if handler.multi_user:  # the service has no single root: keep the full path in the user's folder
            args["notebook"] = str(root.resolve() / args["notebook"])
    args["tenant"] = handler.check_tenant(args["tenant"])
    return args


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
        sort, order = check_sort(self.get_query_argument("sort", None), self.get_query_argument("order", None))
        jobs = self.service.jobs(
            state=state.upper() if state else None, tenant=self.get_query_argument("tenant", None), owner=owner
        )
        jobs = match_text(jobs, self.get_query_argument("q", None))
        if self.get_query_argument("interactive", None) is not None:  # kernels' reservations, or jobs only
            interactive = self._bool_arg("interactive", False)
            jobs = [j for j in jobs if j.spec.interactive == interactive]
        if (sort, order) != ("created", "desc"):  # the service already lists newest first
            jobs = sort_jobs(jobs, sort, order)
        self.finish(page_of_jobs(self, jobs))

    @web.authenticated
    @authorized
    @api_errors
    async def post(self):
        args = checked_submission(self, parse_json_object(self.request.body), interactive_ok=True)
        self.service.check_dependencies(args["after"], self.may_see)
        job = self.service.submit(owner=self.user_name, **args)
        self.set_status(201)
        self.set_header("Location", url_path_join(self.base_url, "gpusched/api/jobs", job.id))
        self.finish(job_detail_json(self.service, job, await self.service.estimated_start(job)))


class JobHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        job = self.job_or_404(job_id)
        self.finish(job_detail_json(self.service, job, await self.service.estimated_start(job)))

    @web.authenticated
    @authorized
    @api_errors
    async def delete(self, job_id: str):
        job = self.job_or_404(job_id)
        if job.state.terminal:
            raise ApiError(409, "conflict", f"job {job_id} already ended ({job.state.value}); nothing to cancel", "id")
        watch = self.service.kernel_watches.get(job_id)  # a GPU kernel's server giving back reclaimed GPUs
        why = f" ({watch.reason})" if watch is not None and watch.reason else ""
        self.service.cancel(job_id, actor=self.user_name + why)
        self.finish(job_detail_json(self.service, job, await self.service.estimated_start(job)))


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
        """The job's log as text, streamed. `?offset=N` returns what follows byte N (at most `?length=`
        bytes, default and maximum MAX_LOG_READ), so a client can follow a running job; the X-Log-Offset
        header gives the next offset. A `Range: bytes=...` header is honoured instead (206)."""
        self.job_or_404(job_id)
        offset = self._int_arg("offset", 0, 0, None)
        length = self._int_arg("length", MAX_LOG_READ, 1, MAX_LOG_READ)
        path = self.service.log_file(job_id)
        size = file_size(path) or 0
        wanted = start_range(self, path, size)
        if wanted is not None:
            offset, length = wanted
        elif offset > size:
            self.set_header("X-Log-Offset", str(size))
            raise ApiError(416, "invalid_value", f"offset {offset} is past the end of the log ({size} bytes)", "offset")
        else:
            length = min(length, size - offset)
        self.set_header("X-Log-Offset", str(offset + length))
        await send_file(self, path, offset, length, "text/plain; charset=utf-8")


class JobOutputHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, job_id: str):
        """The executed notebook, streamed; a `Range: bytes=...` header is honoured (206)."""
        job = self.job_or_404(job_id)
        path = self.service.output_file(job_id)
        size = file_size(path) if path.is_file() else None
        if size is None:
            raise ApiError(
                409 if not job.state.terminal else 404,
                "not_ready" if not job.state.terminal else "not_found",
                f"job {job_id} has no executed notebook yet (it is {job.state.value})"
                if not job.state.terminal
                else f"job {job_id} ended ({job.state.value}) without an executed notebook",
                "id",
            )
        start, length = start_range(self, path, size) or (0, size)
        self.set_header("Content-Disposition", f'attachment; filename="{job_id}.ipynb"')
        await send_file(self, path, start, length, "application/x-ipynb+json")
