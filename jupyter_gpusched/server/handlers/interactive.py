"""GPU kernels: where a kernel's request for GPUs stands (docs/interactive.md)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...core import Job, JobState
from ...service.interactive import kernel_usage, waiting
from ..base import GPUSchedHandler, api_errors
from ..provisioner import GPUKernelProvisioner
from ..serialize import job_json
from ..validation import ApiError


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
        where = waiting(service.scheduler, job, service.clock())
        self.finish(
            {
                "job": job_json(service, job, detail=True),
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
        """The idle warning's "Keep": restart the kernel's idle clock, within its keep allowance."""
        job = self.request_or_404(kernel_id)
        try:
            kernel = self.kernel_manager.get_kernel(kernel_id) if job.state is JobState.RUNNING else None
        except KeyError:  # the server no longer runs it
            kernel = None
        provisioner = getattr(kernel, "provisioner", None)
        if not isinstance(provisioner, GPUKernelProvisioner):
            raise ApiError(409, "conflict", f"kernel {kernel_id!r} holds no GPUs on this server", "kernel_id")
        self.finish({"kept_seconds": provisioner.keep()})


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
