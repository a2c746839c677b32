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
A server whose scheduler is elsewhere (a JupyterHub user server forwarding to the hub service) does the
same over that scheduler's REST API, as the server's user (`remote_kernels.py`); idle reclaim is local only.
"""

from __future__ import annotations

import asyncio
import getpass
import os
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from traitlets import Float, Int, Unicode

from ..core import JobState
from ..core.idle import IdleAction, IdleClock, idle_action
from ..service.interactive import waiting
from .remote_kernels import RemoteError, RemoteKernelRequests, allocated_gpus
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


class GPUKernelProvisioner(LocalProvisioner):
    """A local kernel that starts once the scheduler has given it GPUs, and gives them back when it ends."""

    gpus = Int(1, config=True, help="GPUs the kernel asks for.")
    priority = Unicode("normal", config=True, help="Priority class of its request: high, normal or low.")
    tenant = Unicode(None, allow_none=True, config=True, help="Tenant to charge (default: the user's).")
    poll_interval = Float(0.5, config=True, help="Seconds between looks at the request while it waits.")

    job_id: str | None = None  # the interactive request, while the kernel holds or waits for GPUs
    status: str = ""  # the last waiting message ("waiting for a GPU: #2 in line, about 6 min")
    idle: IdleClock | None = None  # idle reclaim (core/idle.py), while the kernel holds GPUs
    _idle_watch: asyncio.Task | None = None
    _release_why: str = ""  # why the kernel is being shut down by us (idle reclaim)

    async def pre_launch(self, **kwargs: Any) -> dict[str, Any]:
        settings = self._settings()
        if settings.service is None:  # the scheduler is elsewhere (the hub service): ask it over REST
            assert settings.remote_kernels is not None
            gpu_ids = await self._reserve_remote(settings.remote_kernels)
            return await self._start_on(gpu_ids, kwargs)
        service = settings.service
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
        return await self._start_on(gpu_ids, kwargs)

    async def _start_on(self, gpu_ids: tuple[int, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
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
            info = await super().launch_kernel(cmd, **kwargs)
        except BaseException:
            await self._release_any("the kernel could not be launched")
            raise
        if self._idle_watch is None and self._settings().service is not None:  # idle reclaim: local only
            self._idle_watch = asyncio.ensure_future(self._watch_idle())
        return info

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart:
            if self._idle_watch is not None and self._idle_watch is not asyncio.current_task():
                self._idle_watch.cancel()
            self._idle_watch = None
            await self._release_any(self._release_why or "the kernel shut down")

    def keep(self) -> float:
        """The user's "keep" on an idle warning: restart the idle clock (bounded by max_keep); seconds added."""
        service = self._settings().service
        assert service is not None
        if self.idle is None:
            return 0.0
        added = self.idle.keep(service.clock(), service.config.interactive_idle)
        self._set_message("")
        return added

    async def get_provisioner_info(self) -> dict[str, Any]:
        info = await super().get_provisioner_info()
        info["gpusched_job_id"] = self.job_id
        return info

    async def load_provisioner_info(self, provisioner_info: dict) -> None:
        await super().load_provisioner_info(provisioner_info)
        self.job_id = provisioner_info.get("gpusched_job_id")

    # --- helpers -----------------------------------------------------------------------------
    def _settings(self) -> GPUSchedSettings:
        settings = _gpusched_settings(self)
        if settings is None or (settings.service is None and settings.remote_kernels is None):
            raise RuntimeError(
                "this GPU kernel needs the jupyter-gpusched scheduler: in this Jupyter server, or the hub "
                "service this server forwards to (docs/interactive.md)"
            )
        return settings

    async def _reserve_remote(self, remote: RemoteKernelRequests) -> tuple[int, ...]:
        """Hub mode: queue the request with the scheduler's REST API and wait until it runs; its GPUs."""
        if self.job_id is not None:  # a restart keeps its GPUs while the request still holds them
            try:
                job = (await remote.where(str(self.kernel_id)))["job"]
            except RemoteError:
                job = {}
            if job.get("id") == self.job_id and job.get("state") == JobState.RUNNING.value:
                return allocated_gpus(job)
        try:
            job = await remote.submit(str(self.kernel_id), self.gpus, self.priority, self.tenant)
        except RemoteError as exc:
            raise RuntimeError(f"GPU request refused: {exc}") from None
        self.job_id = job["id"]
        self.log.info("kernel %s: GPU request %s queued with %s", self.kernel_id, job["id"], remote.url)
        try:
            while True:
                try:
                    where = await remote.where(str(self.kernel_id))
                except RemoteError as exc:
                    if exc.status != 599:
                        raise
                    self.log.warning("kernel %s: %s; trying again", self.kernel_id, exc)  # the service restarting
                    await asyncio.sleep(max(self.poll_interval, 2.0))
                    continue
                job = where["job"]
                if where["message"] != self.status:
                    self.status = where["message"]
                    self.log.info("kernel %s: %s", self.kernel_id, self.status)
                if job["state"] == JobState.RUNNING.value:
                    return allocated_gpus(job)
                if JobState(job["state"]).terminal:
                    self.job_id = None
                    raise RuntimeError(f"GPU request {job['id']} {job['state'].lower()}: {job['reason']}")
                await asyncio.sleep(self.poll_interval)
        except BaseException:  # cancelled or failed while waiting: never leave the request behind
            await self._release_any("the kernel did not start")
            raise

    async def _release_any(self, why: str) -> None:
        """Give the GPUs back: to the service here, or over REST to the one this server forwards to."""
        settings = _gpusched_settings(self)
        if settings is None or settings.service is not None or settings.remote_kernels is None:
            self._release(why)
            return
        job_id, self.job_id = self.job_id, None
        if job_id is None:
            return
        try:
            await settings.remote_kernels.cancel(job_id)
            self.log.info("kernel %s: GPU request %s released (%s)", self.kernel_id, job_id, why)
        except RemoteError as exc:  # the service answers for it after its restart (docs/interactive.md)
            self.log.warning("kernel %s: could not release GPU request %s: %s", self.kernel_id, job_id, exc)

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

    async def _watch_idle(self) -> None:
        """While the kernel holds GPUs: count its busy seconds (the interactive metrics), and warn, then shut
        it down, while it runs nothing and others wait (core/idle.py)."""
        service = self._settings().service
        assert service is not None
        policy = service.config.interactive_idle
        self.idle = clock = IdleClock(idle_since=service.clock())
        # Sampled each second at most: the busy seconds are as fine as that.
        interval = max(0.1, min(1.0, policy.timeout / 4, policy.warn_for / 4)) if policy.enabled else 1.0
        looked_at = service.clock()
        while self.job_id is not None:
            await asyncio.sleep(interval)
            job = service.scheduler.jobs.get(self.job_id or "")
            if job is None or job.state is not JobState.RUNNING:
                return
            now, km = service.clock(), self.parent
            busy = getattr(km, "execution_state", "") == "busy"
            if busy and job.id in service.info:
                service.info[job.id].busy_s += max(0.0, now - looked_at)
            looked_at = now
            if not policy.enabled:
                continue
            last = getattr(km, "last_activity", None)
            if last is not None:
                clock.activity(last.timestamp())
            action = idle_action(clock, now, busy, len(service.scheduler.queue) > 0, policy)
            if action is IdleAction.WARN:
                clock.warned_at = now
                minutes = max(1, round(policy.warn_for / 60))
                self._set_message(
                    f"this kernel's GPU will be given back in {minutes} minute{'s' if minutes != 1 else ''} "
                    "unless you run something"
                )
                self.log.info("kernel %s: idle while others wait: warned", self.kernel_id)
            elif action is IdleAction.NONE and clock.warned_at is None and job.id in service.info:
                if service.info[job.id].message:
                    self._set_message("")
            elif action is IdleAction.RECLAIM:
                idle_min = (now - clock.idle_since) / 60
                self._release_why = f"idle {idle_min:.0f} min while others waited: GPUs reclaimed"
                if job.id in service.info:
                    service.info[job.id].reclaimed_idle_s = now - clock.idle_since
                self.log.warning("kernel %s: %s", self.kernel_id, self._release_why)
                self._idle_watch = None  # cleanup() must not cancel this task mid-shutdown
                assert km is not None
                await km.parent.shutdown_kernel(self.kernel_id)  # off the server's list; cleanup() frees the GPUs
                return

    def _set_message(self, message: str) -> None:
        """The request's message (the job API's `message`), which the lab shows for this kernel."""
        service = self._settings().service
        if service is not None and self.job_id is not None and self.job_id in service.info:
            service.info[self.job_id].message = message

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
