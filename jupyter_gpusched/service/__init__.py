"""The live service: the scheduling loop over a store and a backend, and what the edges read from it."""

from ..backends.base import LaunchRefused
from .errors import InvalidArgument, JobNotFound, NotConfigured, NotFound, ServiceError, UpstreamError
from .info import JobInfo
from .loop import Service, ServiceConfig

__all__ = [
    "InvalidArgument",
    "JobInfo",
    "JobNotFound",
    "LaunchRefused",
    "NotConfigured",
    "NotFound",
    "Service",
    "ServiceConfig",
    "ServiceError",
    "UpstreamError",
]
