"""A single-user server under JupyterHub: relay the gpusched API to the hub service.

When `c.GPUSched.hub_service_url` (or ``$GPUSCHED_HUB_SERVICE_URL``) is set, the user's
server runs no scheduler. Its ``/gpusched/api/*`` and ``/gpusched/metrics`` routes pass each
request — after this server's own authentication and authorization — to the service, with
this server's Hub token (``$JUPYTERHUB_API_TOKEN``, owned by the server's user), so the
service sees the request as that user's. The lab panel, the magic and the widgets keep
talking to their own server and need no change.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlparse

from jupyter_server.auth.decorator import authorized
from jupyter_server.utils import url_path_join
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httputil import HTTPHeaders, parse_response_start_line

from ..server.base import GPUSchedHandler
from ..server.settings import GPUSchedSettings
from ..server.validation import ApiError

PASSED_HEADERS = (
    "Content-Type",
    "Content-Disposition",
    "Content-Range",
    "Accept-Ranges",
    "X-Log-Offset",
    "Cache-Control",
    "Allow",
)
PASSED_REQUEST_HEADERS = ("Content-Type", "Range", "If-Range")
# A log or an output can be large: it is relayed chunk by chunk as it arrives, never held whole.
MAX_RELAYED_BODY = 1 << 40


class _Relay:
    """A service response on its way to the caller: a 2xx body is written through as it arrives (the
    status and headers first); any other body is small (our JSON errors) and kept to be inspected."""

    def __init__(self, handler: ForwardHandler):
        self.handler = handler
        self.code, self.reason = 0, ""
        self.headers = HTTPHeaders()
        self.started = False
        self.held = bytearray()

    def on_header(self, line: str) -> None:
        if line.startswith("HTTP/"):
            start = parse_response_start_line(line.strip())
            self.code, self.reason, self.headers = start.code, start.reason, HTTPHeaders()
        elif line.strip():
            self.headers.parse_line(line)

    def on_chunk(self, chunk: bytes) -> None:
        if not 200 <= self.code < 300:
            self.held += chunk
            return
        if not self.started:
            self.started = True
            self.handler.start_response(self.code, self.reason, self.headers)
        self.handler.write(chunk)
        self.handler.flush()


@dataclass(frozen=True)
class Forwarder:
    """Where the service is and how to call it."""

    url: str  # the service's base URL, e.g. http://127.0.0.1:10101/services/gpusched/
    token: str
    timeout: float = 60.0

    def __post_init__(self):
        object.__setattr__(self, "url", self.url.rstrip("/") + "/")

    @property
    def prefix(self) -> str:
        return urlparse(self.url).path


@dataclass(frozen=True)
class ForwardSettings(GPUSchedSettings):
    """The handlers' settings on a server that forwards: no service, the way to the one that runs."""

    forwarder: Forwarder | None = None


class CallerStatus:
    """Whether this server's user is a gpusched admin, as the service last said (`api/me`).

    Voila's prelaunch hook, which guards the admin dashboard, cannot wait on the network, so
    the answer is fetched when the server starts and refreshed every `every` seconds; `admin`
    is None until the service has answered once.
    """

    def __init__(self, forwarder: Forwarder, every: float = 60.0):
        self.forwarder = forwarder
        self.every = every
        self.admin: bool | None = None
        self._timer: Any = None

    async def refresh(self) -> None:
        fw = self.forwarder
        if not fw.token:
            return
        request = HTTPRequest(
            fw.url + "gpusched/api/me", headers={"Authorization": f"token {fw.token}"}, request_timeout=10
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
            self.admin = bool(json.loads(response.body)["admin"]) if response.code == 200 else self.admin
        except (OSError, HTTPClientError, ValueError, KeyError, TypeError):
            pass  # keep the last answer; the next refresh tries again

    def start(self) -> None:
        from tornado.ioloop import IOLoop, PeriodicCallback

        IOLoop.current().add_callback(self.refresh)
        self._timer = PeriodicCallback(self.refresh, self.every * 1000)
        self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()


class ForwardHandler(GPUSchedHandler):
    """Relay one request to the hub service and its answer back, unchanged but for Location."""

    @web.authenticated
    @authorized
    async def get(self, path: str = ""):
        await self._forward()

    @web.authenticated
    @authorized
    async def post(self, path: str = ""):
        await self._forward()

    @web.authenticated
    @authorized
    async def delete(self, path: str = ""):
        await self._forward()

    @web.authenticated
    @authorized
    async def put(self, path: str = ""):  # settings/notify
        await self._forward()

    @web.authenticated
    @authorized
    async def patch(self, path: str = ""):  # schedules/{id}: pause, resume, edit
        await self._forward()

    async def _forward(self) -> None:
        gs = self.gpusched
        fw = gs.forwarder if isinstance(gs, ForwardSettings) else None
        if fw is None or not fw.token:
            return self.fail(
                ApiError(503, "unavailable", "this server has no Hub token to reach the GPU scheduler service with")
            )
        local = (
            self.request.path[len(self.base_url) :]
            if self.request.path.startswith(self.base_url)
            else self.request.path
        )
        url = fw.url + local.lstrip("/")
        if self.request.query:
            url += "?" + self.request.query
        headers = {"Authorization": f"token {fw.token}", "Accept": self.request.headers.get("Accept", "*/*")}
        for name in PASSED_REQUEST_HEADERS:
            if name in self.request.headers:
                headers[name] = self.request.headers[name]
        relay = _Relay(self)
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        request = HTTPRequest(
            url,
            method=self.request.method,
            headers=headers,
            body=body,
            follow_redirects=False,
            request_timeout=fw.timeout,
            allow_nonstandard_methods=True,
            header_callback=relay.on_header,
            streaming_callback=relay.on_chunk,
        )
        client = AsyncHTTPClient(force_instance=True, max_body_size=MAX_RELAYED_BODY)
        try:
            response = await client.fetch(request, raise_error=False)
        except (OSError, HTTPClientError) as exc:
            response = None
            self.log.warning("gpusched: hub service at %s unreachable: %s", fw.url, exc)
        finally:
            client.close()
        if relay.started:  # the body went through as it came (a broken-off one just ends short)
            self.finish()
            return
        if response is None or response.code == 599:
            return self.fail(
                ApiError(
                    503, "unavailable", f"the GPU scheduler service ({fw.url}) is not reachable; try again shortly"
                )
            )
        body = bytes(relay.held)
        if response.code in (401, 403) and _error_code(body) in ("unauthenticated", None):
            return self.fail(
                ApiError(
                    502,
                    "hub_auth",
                    "the GPU scheduler service refused this server's Hub token; the token needs the scope "
                    f"access:services!service=<name> (see docs/jupyterhub.md): {response.code} {response.reason}",
                )
            )
        self.start_response(response.code, response.reason, response.headers)
        self.finish(body)

    def start_response(self, code: int, reason: str, headers: HTTPHeaders) -> None:
        """The service's status and the headers a caller needs (a moved job's Location made ours)."""
        fw = cast(ForwardSettings, self.gpusched).forwarder
        assert fw is not None
        self.set_status(code, reason)
        for name in PASSED_HEADERS:
            if name in headers:
                self.set_header(name, headers[name])
        if "Location" in headers:
            location = headers["Location"]
            if location.startswith(fw.prefix):
                location = url_path_join(self.base_url, location[len(fw.prefix) :])
            self.set_header("Location", location)


def _error_code(body: bytes) -> str | None:
    """The `error` of a JSON error body, or None when the body is not one of ours."""
    try:
        data = json.loads(body or b"null")
    except ValueError:
        return None
    return data.get("error") if isinstance(data, dict) else None


def forward_handlers(base_url: str) -> list[tuple[str, type]]:
    root = url_path_join(base_url, "gpusched")
    return [
        (root + "/api(?P<path>/.*)?", ForwardHandler),
        (root + "/metrics", ForwardHandler),
        (root + "/dashboard", ForwardHandler),
    ]
