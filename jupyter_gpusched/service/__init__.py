"""The live service: the scheduling loop over a store and a backend, and what the edges read from it."""

from .loop import JobNotFound, Service, ServiceConfig

__all__ = ["JobNotFound", "Service", "ServiceConfig"]
