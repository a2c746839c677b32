"""What the service refuses or cannot do, in its own words; the edges (REST, CLI) decide how to show it.

Each error is one readable sentence (`message`), the input at fault (`field`, or None) and a
short `code` naming the kind (the same vocabulary the REST API's error bodies use)."""

from __future__ import annotations


class ServiceError(Exception):
    code = "error"

    def __init__(self, message: str, field: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        if code is not None:
            self.code = code


class JobNotFound(KeyError):
    """No job with this id (a KeyError, so a lookup reads as one)."""


class InvalidArgument(ServiceError):
    """An argument the service cannot use (an unknown series or model, ...)."""

    code = "invalid_value"


class NotFound(ServiceError):
    """The argument names something the service does not have (a tenant, ...)."""

    code = "not_found"


class NotConfigured(ServiceError):
    """The request needs a setting this installation does not have (e.g. a Prometheus URL)."""

    code = "not_configured"


class UpstreamError(ServiceError):
    """A source the service reads (Prometheus) failed. `status` is how a gateway reports it,
    502 (it answered with an error or with something else) or 503 (it could not be reached),
    so every edge reports it the same way."""

    def __init__(self, message: str, code: str, unreachable: bool = False):
        super().__init__(message, None, code)
        self.unreachable = unreachable

    @property
    def status(self) -> int:
        return 503 if self.unreachable else 502
