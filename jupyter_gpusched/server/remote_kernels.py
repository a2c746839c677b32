"""GPU kernels on a server whose scheduler is elsewhere: their requests over the scheduler's REST API.

A JupyterHub user server forwards its gpusched API to the hub service (hub/forward.py) and runs no
scheduler. Its GPU kernels' provisioner (server/provisioner.py) asks the service the same way, as the
server's user (the server's Hub token): `POST jobs` with `interactive: true`, then `GET
interactive/{kernel_id}` until the request runs (its `allocation` names the GPUs), and `DELETE jobs/{id}`
when the kernel ends. The service checks and attributes it like a job (tenant, quota, interactive share).
While the kernel holds GPUs, `POST interactive/{kernel_id}/activity` reports what it does; the service's idle
watch answers whether to shut it down (idle reclaim).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest


class RemoteError(RuntimeError):
    """The scheduler answered with an error, or could not be reached (`status` 599)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RemoteKernelRequests:
    """The scheduler's API at `url` (e.g. http://127.0.0.1:10101/services/gpusched/), called with `token`."""

    url: str
    token: str
    timeout: float = 30.0

    async def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        request = HTTPRequest(
            self.url.rstrip("/") + "/gpusched/api/" + path,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            request_timeout=self.timeout,
            allow_nonstandard_methods=True,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            raise RemoteError(599, f"the GPU scheduler service ({self.url}) is not reachable: {exc}") from None
        try:
            data = json.loads(response.body or b"{}")
        except ValueError:
            data = {}
        if response.code == 599:
            raise RemoteError(599, f"the GPU scheduler service ({self.url}) is not reachable: {response.error}")
        if not 200 <= response.code < 300:
            message = data.get("message") if isinstance(data, dict) else None
            raise RemoteError(response.code, f"GPU scheduler service: {response.code} {message or response.reason}")
        return data if isinstance(data, dict) else {}

    async def submit(self, kernel_id: str, gpus: int, priority: str, tenant: str | None) -> dict[str, Any]:
        """Queue the kernel's request; its job (as `GET jobs/{id}` has it)."""
        body: dict[str, Any] = {"notebook": f"kernel:{kernel_id}", "gpus": gpus, "priority": priority}
        if tenant:
            body["tenant"] = tenant
        return await self.call("POST", "jobs", {**body, "interactive": True})

    async def where(self, kernel_id: str) -> dict[str, Any]:
        """Where the kernel's latest request stands: `job`, `message`, `position`, `eta_seconds`."""
        return await self.call("GET", f"interactive/{kernel_id}")

    async def activity(
        self, kernel_id: str, job_id: str, busy: bool, busy_seconds: float, idle_seconds: float | None
    ) -> dict[str, Any]:
        """Report the kernel's activity for its idle watch (docs/interactive.md, "Idle reclaim"): busy now,
        its busy seconds on this request so far, seconds since it last ran something. The answer: `action`
        (none, warn, reclaim), `message`, `reason`, `report_every` (seconds)."""
        body = {"job_id": job_id, "busy": busy, "busy_seconds": busy_seconds, "idle_seconds": idle_seconds}
        return await self.call("POST", f"interactive/{kernel_id}/activity", body)

    async def cancel(self, job_id: str) -> None:
        """Give the request's GPUs back (or leave the line); one that already ended is left as it is."""
        try:
            await self.call("DELETE", f"jobs/{job_id}")
        except RemoteError as exc:
            if exc.status not in (404, 409):  # gone, or ended already: nothing to give back
                raise


def allocated_gpus(job: dict[str, Any]) -> tuple[int, ...]:
    """The GPU indices of a job's `allocation` (one node's, as the local backend's are)."""
    return tuple(g for part in job.get("allocation") or () for g in part.get("gpus", ()))
