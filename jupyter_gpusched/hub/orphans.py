"""Hub mode: give back the GPUs of kernels whose user's server is gone.

A user's server frees its GPU kernels' reservations when it shuts them down (server/provisioner.py). A
server that stops without doing so (killed, crashed, its pod evicted) leaves them held in the hub
service. So the service asks the Hub, every `interval` seconds, about the users who hold or wait for
kernel GPUs (``GET /hub/api/users/{name}``, which needs the ``read:servers`` scope; `configure_hub`
grants it), and cancels a request unless one of its user's running servers was started before the
request was made: with no server, or only servers started since (a restart), its kernel is gone.

The decision (`orphaned`) is pure; the Hub is asked with async HTTP, so the event loop never waits.
A Hub that cannot be asked (down, the scope missing) releases nothing: only a clear answer does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..core import Job
from ..service import Service

REASON = "its user's server stopped without shutting the kernel down, so its GPUs are released"
SCOPE = "read:servers"  # the hub service's token needs it to see users' servers


def started_at(server: Mapping[str, Any]) -> float | None:
    """A Hub server model's `started` (ISO 8601, UTC) as a Unix time; None if not started."""
    value = server.get("started")
    if not value:
        return None
    when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


def orphaned(jobs: Iterable[Job], servers: Mapping[str, Mapping[str, Any]]) -> list[Job]:
    """The kernel requests among `jobs` whose kernel cannot be alive: no running server of its owner
    (`servers`: owner → the Hub's `servers` of that user; owners missing from it are not judged) was
    started before the request was made."""
    out = []
    for job in jobs:
        owner = job.spec.owner
        if not job.spec.interactive or job.state.terminal or owner not in servers:
            continue
        starts = (started_at(s) for s in servers[owner].values())
        if not any(t is not None and t <= job.submitted_at for t in starts):
            out.append(job)
    return out


class OrphanedKernels:
    """The hub service's periodic check (see the module's doc)."""

    def __init__(self, service: Service, api_url: str, api_token: str, interval: float, log: logging.Logger):
        self.service = service
        self.api_url = api_url.rstrip("/") + "/"
        self.api_token = api_token
        self.interval = interval
        self.log = log
        self._task: asyncio.Task | None = None
        self._may_read_servers = False  # the token's scopes, once the Hub has shown them
        self._scope_warned = False

    def start(self) -> None:
        if self._task is None and self.interval > 0:
            self._task = asyncio.get_event_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception:  # noqa: BLE001 - one failed pass must not end the check
                self.log.exception("jupyter-gpusched: checking kernels' servers failed")

    async def check(self) -> list[str]:
        """One pass: release the requests of kernels whose server is gone; their ids."""
        pending = [j for j in self.service.scheduler.jobs.values() if j.spec.interactive and not j.state.terminal]
        if not pending or not await self.may_read_servers():
            return []
        servers: dict[str, Mapping[str, Any]] = {}
        for owner in sorted({j.spec.owner for j in pending}):
            found = await self.servers_of(owner)
            if found is not None:
                servers[owner] = found
        released = []
        for job in orphaned(pending, servers):
            if job.state.terminal:  # ended while we asked the Hub
                continue
            self.service.cancel(job.id, actor=f"gpusched: {REASON}")
            self.log.warning("jupyter-gpusched: kernel request %s of %s released: %s", job.id, job.spec.owner, REASON)
            released.append(job.id)
        return released

    async def may_read_servers(self) -> bool:
        """Whether this service's token holds `SCOPE` unfiltered (else the Hub answers 404 for users it
        may not see, which must not read as "gone")."""
        if not self._may_read_servers:
            code, model = await self._get("user")
            self._may_read_servers = code == 200 and SCOPE in model.get("scopes", ())
            if code == 200 and not self._may_read_servers and not self._scope_warned:
                self._scope_warned = True
                self.log.error(
                    "jupyter-gpusched: this service's Hub token lacks the %r scope (configure_hub grants it; "
                    "docs/jupyterhub.md): kernels of servers that stopped abruptly keep their GPUs until cancelled",
                    SCOPE,
                )
        return self._may_read_servers

    async def servers_of(self, user: str) -> Mapping[str, Any] | None:
        """The user's running servers as the Hub has them ({} if the user is gone); None: no clear answer."""
        code, model = await self._get("users/" + quote(user, safe=""))
        if code == 404:
            return {}
        if code != 200 or "servers" not in model:
            return None
        return model["servers"] or {}

    async def _get(self, path: str) -> tuple[int, dict[str, Any]]:
        """GET the Hub API as this service: (status, JSON body); 599 if the Hub cannot be reached."""
        request = HTTPRequest(
            self.api_url + path, headers={"Authorization": f"token {self.api_token}"}, request_timeout=10
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            self.log.warning("jupyter-gpusched: the Hub API is not reachable: %s", exc)
            return 599, {}
        if response.code != 200:
            if response.code != 404:
                self.log.warning("jupyter-gpusched: the Hub API answered %s for %s", response.code, path)
            return response.code, {}
        try:
            body = json.loads(response.body or b"{}")
        except ValueError:
            return 599, {}
        return response.code, body if isinstance(body, dict) else {}
