"""GPU kernels: where a kernel's request for GPUs stands (docs/interactive.md)."""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ...service.interactive import waiting
from ..base import GPUSchedHandler, api_errors
from ..serialize import job_json
from ..validation import ApiError


class KernelRequestHandler(GPUSchedHandler):
    @web.authenticated
    @authorized
    @api_errors
    async def get(self, kernel_id: str):
        """The kernel's latest request: its job, and the line the lab shows while the kernel waits."""
        service = self.service
        label = f"kernel:{kernel_id}"
        mine = [
            j
            for j in service.scheduler.jobs.values()
            if j.spec.interactive and j.spec.notebook == label and (self.is_admin or j.spec.owner == self.user_name)
        ]
        if not mine:
            raise ApiError(404, "not_found", f"no GPU request for kernel {kernel_id!r}", "kernel_id")
        job = max(mine, key=lambda j: j.seq)
        where = waiting(service.scheduler, job, service.clock())
        self.finish(
            {
                "job": job_json(service, job, detail=True),
                "message": where.message,
                "position": where.position,
                "eta_seconds": where.eta_seconds,
            }
        )
