"""The base of every gpusched API handler: the service, JSON errors (the service's too), query arguments."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..core import SpecError
from ..service import InvalidArgument, JobNotFound, NotConfigured, NotFound, Service, ServiceError, UpstreamError
from .access import AUTH_RESOURCE, Identity
from .validation import ApiError

# The HTTP status of each kind of service error (UpstreamError carries its own: 502 or 503).
SERVICE_ERROR_STATUS: dict[type[ServiceError], int] = {InvalidArgument: 400, NotConfigured: 400, NotFound: 404}
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
MAX_URI_CHARS = 8192  # a longer request URI gets 414 (what reaches us: see routes.answer_long_request_lines)
TRUE_WORDS, FALSE_WORDS = ("true", "1", "yes"), ("false", "0", "no")


class GPUSchedHandler(Identity, APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> Service:
        service = self.gpusched.service
        if service is None:
            raise ApiError(503, "unavailable", "this server runs no GPU scheduler")
        service.start()  # idempotent; covers servers that never ran the extension's start hook
        service.require_owner()  # a standby (another scheduler owns the store) answers 503
        return service

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Every error, ours or tornado's, as {"error", "message", "field"}."""
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, ApiError):
            body = exc.body()
        elif isinstance(exc, web.HTTPError) and status_code == 403 and not exc.log_message and self._anonymous:
            body = {
                "error": "unauthenticated",
                "message": "not signed in: send a valid token (Authorization: token ...) or log in",
                "field": None,
            }
        elif isinstance(exc, web.HTTPError):
            body = {"error": _code(exc.status_code), "message": exc.log_message or self._reason, "field": None}
        else:
            body = {"error": "internal", "message": "internal server error; see the server log", "field": None}
        if status_code == 405:  # RFC 9110: a 405 names the methods the resource has
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))

    @classmethod
    def allowed_methods(cls) -> list[str]:
        unimplemented = web.RequestHandler.get  # tornado's 405 for every method a handler lacks
        return [m for m in HTTP_METHODS if getattr(cls, m.lower(), unimplemented) is not unimplemented]

    @property
    def _anonymous(self) -> bool:
        return getattr(self, "_jupyter_current_user", None) is None

    def fail(self, error: ApiError) -> None:
        self.set_status(error.status)
        self.write_error(error.status, exc_info=(type(error), error, None))

    def _int_arg(self, name: str, default: int, low: int, high: int | None) -> int:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        try:
            value = int(raw)
        except ValueError:
            raise ApiError(400, "wrong_type", f"{name} must be a whole number", name) from None
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"between {low} and {high}"
            raise ApiError(400, "invalid_value", f"{name} must be {bound}", name)
        return value

    def _bool_arg(self, name: str, default: bool) -> bool:
        raw = self.get_query_argument(name, None)
        if raw is None:
            return default
        if raw.lower() in TRUE_WORDS or raw.lower() in FALSE_WORDS:
            return raw.lower() in TRUE_WORDS
        raise ApiError(400, "wrong_type", f"{name} must be true or false", name)

    def may_see(self, job) -> bool:
        """Hub isolation: an admin sees every job, a user only their own."""
        return self.is_admin or job.spec.owner == self.user_name

    def job_or_404(self, job_id: str):
        try:
            job = self.service.get(job_id)
        except JobNotFound:
            raise ApiError(404, "not_found", f"no job {job_id!r}", "id") from None
        if not self.is_admin and job.spec.owner != self.user_name:
            raise ApiError(404, "not_found", f"no job {job_id!r}", "id")  # others' jobs do not exist for you
        return job


class UnknownPathHandler(GPUSchedHandler):
    """Unknown paths under the API: 403 for a caller who is not signed in (as on every known path,
    so the API's shape is not probed anonymously), else our JSON 404; 414 for an over-long URI."""

    async def prepare(self):
        await super().prepare()
        if self.current_user is None:
            raise web.HTTPError(403)
        if len(self.request.uri or "") > MAX_URI_CHARS:
            error = ApiError(414, "uri_too_long", f"the request URI is over {MAX_URI_CHARS} characters")
        else:
            error = ApiError(404, "not_found", f"no API endpoint at {self.request.path[:200]}")
        self.fail(error)


def _code(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "forbidden",
        404: "not_found",
        405: "method_not_allowed",
        409: "conflict",
        413: "too_large",
        414: "uri_too_long",
    }.get(status, "error")


def http_error(err: ServiceError) -> ApiError:
    """A service error as the REST API answers it."""
    if isinstance(err, UpstreamError):
        status = err.status
    else:
        status = next((s for kind, s in SERVICE_ERROR_STATUS.items() if isinstance(err, kind)), 500)
    return ApiError(status, err.code, err.message, err.field)


def api_errors(method):
    """Turn ApiError / SpecError / ServiceError raised by a handler method into the JSON error response."""

    async def wrapper(self, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except ApiError as err:
            self.fail(err)
        except SpecError as err:
            self.fail(ApiError(400, "invalid_value", err.message, err.field))
        except ServiceError as err:
            self.fail(http_error(err))

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper
