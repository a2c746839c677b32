"""GPU kernels: where a kernel's request for GPUs stands (docs/interactive.md)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core import Job, JobState
from ...core.idle import IdleAction, IdleClock
from ...service.interactive import KernelIdleWatch, kernel_usage, waiting
from ..base import GPUSchedHandler, api_errors
from ..serialize import job_detail_json
from ..validation import ApiError, parse_json_object


class KernelRequestMixin(GPUSchedHandler):
    def request_or_404(self, kernel_id: str) -> Job:
        """The kernel's latest request, the caller's own unless an admin asks."""
        label = f"kernel:{kernel_id}"
        mine = [
            j
            for j in self.service.scheduler.jobs.values()
            if j.spec.interactive and j.spec.notebook == label and (self.is_admin or j.spec.owner == self.user_name)
        ]
        if not mine:
            raise ApiError(404, "not_found", f"no GPU request for kernel {kernel_id!r}", "kernel_id")
        return max(mine, key=lambda j: j.seq)


class KernelRequestHandler(KernelRequestMixin):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, kernel_id: str):
        """The kernel's latest request: its job, and the line the lab shows while the kernel waits."""
        service = self.service
        job = self.request_or_404(kernel_id)
        start = await service.estimated_start(job)
        where = waiting(service.scheduler, job, start, service.clock())
        self.finish(
            {
                "job": job_detail_json(service, job, start),
                "message": where.message,
                "position": where.position,
                "eta_seconds": where.eta_seconds,
            }
        )


class KernelKeepHandler(KernelRequestMixin):
    @web.authenticated
    @authorized
    @api_errors
    async def post(self, kernel_id: str):
        """The idle warning's "Keep": restart the kernel's idle clock, within its keep allowance. The watch is
        this server's provisioner's, or (hub service) the one its user's server reports to."""
        job = self.request_or_404(kernel_id)
        watch = self.service.kernel_watches.get(job.id) if job.state is JobState.RUNNING else None
        if watch is None:
            raise ApiError(409, "conflict", f"kernel {kernel_id!r} holds no GPUs on this server", "kernel_id")
        self.finish({"kept_seconds": watch.keep(self.service.clock())})


class KernelActivityHandler(KernelRequestMixin):
    @web.authenticated
    @authorized
    @api_errors
    async def post(self, kernel_id: str):
        """Hub mode: the user's server reports what its GPU kernel does; the idle watch here answers whether
        to warn or shut it down (docs/interactive.md, "Idle reclaim"). Only for the caller's own kernel."""
        job = self.request_or_404(kernel_id)
        if job.spec.owner != self.user_name:  # an admin too: only the kernel's own server reports on it
            raise ApiError(403, "forbidden", f"kernel {kernel_id!r} is {job.spec.owner}'s", "kernel_id")
        body = parse_json_object(self.request.body)
        if body.get("job_id") != job.id:
            raise ApiError(409, "conflict", f"kernel {kernel_id!r}'s request is {job.id}", "job_id")
        busy, busy_s, idle_s = body.get("busy"), body.get("busy_seconds"), body.get("idle_seconds")
        if not isinstance(busy, bool):
            raise ApiError(400, "invalid_value", "busy: expected true or false", "busy")
        for name, value in (("busy_seconds", busy_s), ("idle_seconds", idle_s)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise ApiError(400, "invalid_value", f"{name}: expected seconds (a number >= 0)", name)
        service, now = self.service, self.service.clock()
        if job.state is not JobState.RUNNING:
            raise ApiError(409, "conflict", f"kernel {kernel_id!r} holds no GPUs ({job.state.value})", "kernel_id")
        watch = service.kernel_watches.get(job.id)
        if watch is None:  # its first report (or the first since this service restarted)
            since = max(job.started_at or now, now - idle_s) if idle_s is not None else now
            watch = service.kernel_watches[job.id] = KernelIdleWatch(service, job.id, IdleClock(since), remote=True)
            for gone in [j for j, w in service.kernel_watches.items() if w.remote and not _holds(service, j)]:
                del service.kernel_watches[gone]  # requests that ended since: nothing to watch
        elif not watch.remote:
            raise ApiError(409, "conflict", f"kernel {kernel_id!r} is watched by this server itself", "kernel_id")
        info = service.info.get(job.id)
        added = max(0.0, float(busy_s or 0.0) - (info.busy_s if info is not None else 0.0))  # a running total
        action = watch.observe(now, busy, None if idle_s is None else now - idle_s, added)
        self.finish(
            {
                "action": action.value,
                "message": service.info[job.id].message,
                "reason": watch.reason if action is IdleAction.RECLAIM else "",
                "report_every": watch.report_every(),
            }
        )


def _holds(service, job_id: str) -> bool:
    job = service.scheduler.jobs.get(job_id)
    return job is not None and job.state is JobState.RUNNING


class KernelUsageHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """GPU kernels' GPU-hours per user: held, executing, idle reclaimed (every user's for admins)."""
        service = self.service
        usage = kernel_usage(service.scheduler.jobs.values(), service.info, service.clock())
        if not self.is_admin:
            usage = {u: v for u, v in usage.items() if u == self.user_name}
        users = {
            u: {
                "held_gpu_hours": v["held"],
                "executing_gpu_hours": v["executing"],
                "reclaimed_idle_gpu_hours": v["reclaimed_idle"],
                "reclaims": int(v["reclaims"]),
                "kernels": int(v["kernels"]),
            }
            for u, v in sorted(usage.items())
        }
        self.finish({"users": users})
