"""GPU kernels: a kernel provisioner that queues for GPUs before its kernel starts.

`GPUKernelProvisioner` is registered under the `jupyter_client.kernel_provisioners` entry point as
`gpusched-provisioner`; a kernelspec selects it with `metadata.kernel_provisioner` (see
`kernel_spec` below and `jupyter gpusched kernelspec install`). It runs inside the Jupyter server's
process, next to the scheduler, and calls the live service directly (no HTTP round trip, no token):
1. `pre_launch` submits an *interactive* request (the server user's, their tenant, the spec's GPUs and
   priority) and waits, the kernel "starting", until the scheduler admits it (the service then reserves
   the GPUs; nothing else runs on them). A request cancelled meanwhile (the job API's cancel) fails the start.
2. the kernel starts with CUDA_VISIBLE_DEVICES set to the reserved GPUs (the scheduler's allocation on the
   local backend, as its notebook jobs get them);
3. shutting the kernel down, or culling it, cancels the request: the GPUs go back to the queue at once.
   A restart keeps them (the same reservation).
A server whose scheduler is elsewhere (a JupyterHub user server forwarding to the hub service) has no
service here: such a kernel fails to start with a message saying so (docs/interactive.md).
"""

from __future__ import annotations

import asyncio
import getpass
import os
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Float, Int, Unicode

from ..core import JobState
from ..service.interactive import waiting
from .settings import GPUSchedSettings, settings_of

PROVISIONER_NAME = "gpusched-provisioner"


def kernel_spec(gpus: int, priority: str = "normal", tenant: str | None = None, display_name: str = "") -> dict:
    """The kernel.json of a Python kernel that waits for `gpus` GPUs through the scheduler."""
    config: dict[str, Any] = {"gpus": gpus, "priority": priority}
    if tenant:
        config["tenant"] = tenant
    return {
        "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": display_name or f"Python 3 ({gpus} GPU{'s' if gpus != 1 else ''})",
        "language": "python",
        "metadata": {
            "debugger": True,
            "kernel_provisioner": {"provisioner_name": PROVISIONER_NAME, "config": config},
        },
    }


class GPUKernelProvisioner(LocalProvisioner):  # type: ignore[misc]
    """A local kernel that starts once the scheduler has given it GPUs, and gives them back when it ends."""

    gpus = Int(1, config=True, help="GPUs the kernel asks for.")
    priority = Unicode("normal", config=True, help="Priority class of its request: high, normal or low.")
    tenant = Unicode(None, allow_none=True, config=True, help="Tenant to charge (default: the user's).")
    poll_interval = Float(0.5, config=True, help="Seconds between looks at the request while it waits.")

    job_id: str | None = None  # the interactive request, while the kernel holds or waits for GPUs
    status: str = ""  # the last waiting message ("waiting for a GPU: #2 in line, about 6 min")

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        settings = self._settings()
        service = settings.service
        assert service is not None
        service.start()  # idempotent, as in the handlers: a server that never ran the extension's start hook
        if self.job_id is None or service.get(self.job_id).state is not JobState.RUNNING:  # a restart keeps them
            owner = settings.owner or getpass.getuser()
            job = service.submit(
                notebook=f"kernel:{self.kernel_id}",
                owner=owner,
                gpus=self.gpus,
                priority=self.priority,
                tenant=self.tenant,
                interactive=True,
            )
            self.job_id = job.id
            self.log.info("kernel %s: GPU request %s queued", self.kernel_id, job.id)
        try:
            gpu_ids = await self._wait_for_gpus()
        except BaseException:  # cancelled or failed while waiting: never leave the request behind
            self._release("the kernel did not start")
            raise
        env = dict(kwargs.get("env") or os.environ)
        env.update(
            {
                "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpu_ids)),
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # indices as NVML numbers them, as for jobs
                "GPUSCHED_JOB_ID": self.job_id or "",
            }
        )
        kwargs["env"] = env
        self.log.info("kernel %s: starting on GPUs %s", self.kernel_id, env["CUDA_VISIBLE_DEVICES"])
        return await super().pre_launch(**kwargs)

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> Any:
        try:
            return await super().launch_kernel(cmd, **kwargs)
        except BaseException:
            self._release("the kernel could not be launched")
            raise

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart:
            self._release("the kernel shut down")

    def get_provisioner_info(self) -> dict[str, Any]:
        info = super().get_provisioner_info()
        info["gpusched_job_id"] = self.job_id
        return info

    async def load_provisioner_info(self, provisioner_info: dict) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.job_id = provisioner_info.get("gpusched_job_id")

    # --- helpers -----------------------------------------------------------------------------
    def _settings(self) -> GPUSchedSettings:
        settings = _gpusched_settings(self)
        if settings is None or settings.service is None:
            raise RuntimeError(
                "this GPU kernel needs the jupyter-gpusched scheduler running in this Jupyter server "
                "(GPU kernels on a JupyterHub user server are not supported yet: docs/interactive.md)"
            )
        return settings

    async def _wait_for_gpus(self) -> tuple[int, ...]:
        service = self._settings().service
        assert service is not None and self.job_id is not None
        while True:
            job = service.get(self.job_id)
            where = waiting(service.scheduler, job, service.clock())
            if where.message != self.status:
                self.status = where.message
                self.log.info("kernel %s: %s", self.kernel_id, where.message)
            if job.state is JobState.RUNNING:
                return where.gpu_ids
            if job.state.terminal:
                self.job_id = None
                raise RuntimeError(f"GPU request {job.id} {job.state.value.lower()}: {job.reason}")
            await asyncio.sleep(self.poll_interval)

    def _release(self, why: str) -> None:
        job_id, self.job_id = self.job_id, None
        settings = _gpusched_settings(self)
        if job_id is None or settings is None or settings.service is None:
            return
        service = settings.service
        job = service.scheduler.jobs.get(job_id)
        if job is not None and not job.state.terminal:
            service.cancel(job_id, actor=f"kernel {self.kernel_id}: {why}")
            self.log.info("kernel %s: GPU request %s released (%s)", self.kernel_id, job_id, why)


def _gpusched_settings(provisioner: Any) -> GPUSchedSettings | None:
    """The extension's settings on the Jupyter server that owns this kernel (its kernel manager's parents)."""
    node = provisioner.parent
    while node is not None:
        web_app = getattr(node, "web_app", None)
        if web_app is not None:
            return settings_of(web_app.settings)
        node = getattr(node, "parent", None)
    return None
