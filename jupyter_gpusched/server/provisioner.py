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
same over that scheduler's REST API, as the server's user (`remote_kernels.py`); its idle reclaim is decided
there, on this server's reports of the kernel's activity (`_report_activity`).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import time
from typing import Any

from jupyter_client.provisioning import LocalProvisioner
from jupyter_core.utils import ensure_async
from traitlets import Float, Int, Unicode

from ..core import JobState
from ..core.idle import IdleAction, IdleClock
from ..service.interactive import KernelIdleWatch, waiting
from .remote_kernels import RemoteError, RemoteKernelRequests, allocated_gpus
from .settings import GPUSchedSettings, settings_of

PROVISIONER_NAME = "gpusched-provisioner"
RUNNING_PROBE_S = 3.0  # a kernel at its prompt answers kernel_info in milliseconds; slack for a loaded machine


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
    _idle_watch: asyncio.Task | None = None
    _release_why: str = ""  # why the kernel is being shut down by us (idle reclaim)
    _running_seen_at: float = 0.0  # when a reclaim found the kernel running code its server saw as idle

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
        settings = self._settings()
        if self._idle_watch is None and self.job_id is not None:  # idle reclaim and busy seconds
            if settings.service is not None:
                self._idle_watch = asyncio.ensure_future(self._watch_idle())
            elif settings.remote_kernels is not None:
                self._idle_watch = asyncio.ensure_future(self._report_activity(settings.remote_kernels))
        return info

    async def cleanup(self, restart: bool = False) -> None:
        await super().cleanup(restart=restart)
        if not restart:
            if self._idle_watch is not None and self._idle_watch is not asyncio.current_task():
                self._idle_watch.cancel()
            self._idle_watch = None
            await self._release_any(self._release_why or "the kernel shut down")

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
            start = await service.estimated_start(service.get(self.job_id))
            job = service.get(self.job_id)  # as it is now: it may have moved while the estimate ran
            where = waiting(service.scheduler, job, start, service.clock())
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
        it down, while it runs nothing and others wait (service/interactive.py, core/idle.py)."""
        service = self._settings().service
        assert service is not None and self.job_id is not None
        watch = KernelIdleWatch(service, self.job_id, IdleClock(idle_since=service.clock()))
        service.kernel_watches[self.job_id] = watch
        looked_at = service.clock()
        try:
            while self.job_id is not None:
                await asyncio.sleep(watch.sample_every())
                job = service.scheduler.jobs.get(self.job_id or "")
                if job is None or job.state is not JobState.RUNNING:
                    return
                now, km = service.clock(), self.parent
                busy = getattr(km, "execution_state", "") == "busy"
                action = watch.observe(now, busy, self._last_activity(), now - looked_at if busy else 0.0)
                looked_at = now
                if action is IdleAction.RECLAIM and await self._reclaim(watch.reason):
                    return
        finally:
            if service.kernel_watches.get(watch.job_id) is watch:
                del service.kernel_watches[watch.job_id]

    async def _report_activity(self, remote: RemoteKernelRequests) -> None:
        """Hub mode: the same watch, at the hub service (which knows who waits): sample the kernel here, report
        its busy seconds and idleness there (`POST interactive/{kernel_id}/activity`), and shut it down when
        the answer is "reclaim". The lab's warning and Keep go to the service through the forwarder."""
        job_id, busy_s, every, sample = self.job_id, 0.0, 1.0, 0.5
        looked_at = time.monotonic()
        reported_at = looked_at - every  # the first look is reported: the answer says how often to
        while self.job_id is not None and self.job_id == job_id:
            await asyncio.sleep(sample)
            now, km = time.monotonic(), self.parent
            busy = getattr(km, "execution_state", "") == "busy"
            busy_s += now - looked_at if busy else 0.0
            looked_at = now
            if now - reported_at < every:
                continue
            reported_at = now
            last = self._last_activity()
            idle_s = None if last is None else max(0.0, time.time() - last)
            try:
                answer = await remote.activity(str(self.kernel_id), job_id, busy, busy_s, idle_s)
            except RemoteError as exc:
                if exc.status in (404, 409):  # the request ended or is not watched there: nothing to report
                    return
                self.log.warning("kernel %s: activity not reported: %s", self.kernel_id, exc)
                continue
            every = float(answer.get("report_every") or every)
            sample = max(0.1, min(1.0, every))
            if answer.get("action") == IdleAction.RECLAIM.value and await self._reclaim(
                str(answer.get("reason") or "idle while others waited: GPUs reclaimed")
            ):
                return

    def _last_activity(self) -> float | None:
        """When the kernel last ran something (epoch seconds): its server's `last_activity`, or later, when a
        reclaim found it running code the server had missed."""
        last = getattr(self.parent, "last_activity", None)
        if last is None:
            return self._running_seen_at or None
        return max(last.timestamp(), self._running_seen_at)

    async def _reclaim(self, why: str) -> bool:
        """Idle reclaim: shut the kernel down through the server (the notebook stays open); cleanup() frees.
        Not while it runs code: False then (its idle clock restarts)."""
        if await self._runs_code():
            self._running_seen_at = time.time()
            self.log.warning("kernel %s: looked idle but is running code: not reclaimed", self.kernel_id)
            return False
        self._release_why = why
        self.log.warning("kernel %s: %s", self.kernel_id, why)
        self._idle_watch = None  # cleanup() must not cancel this task mid-shutdown
        km = self.parent
        assert km is not None
        await km.parent.shutdown_kernel(self.kernel_id)  # off the server's list; cleanup() frees the GPUs
        return True

    async def _runs_code(self) -> bool:
        """Whether the kernel is running code, asked of the kernel itself: it answers shell requests one at a
        time, so one that runs a cell leaves a kernel_info request unanswered. The server's execution_state
        can say idle while code runs: it learns "busy" from one status message, and code sent before its
        iopub subscription holds (at a kernel's start) publishes that message unseen."""
        km = self.parent
        assert km is not None
        if not await ensure_async(km.is_alive()):
            return False  # a dead kernel runs nothing: shutting it down frees the GPUs
        client = km.client()
        client.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        try:
            await client.kernel_info(reply=True, timeout=RUNNING_PROBE_S)
            return False
        except TimeoutError:
            return True
        finally:
            client.stop_channels()

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
