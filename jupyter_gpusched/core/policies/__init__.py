"""Scheduling policies, all behind one interface.

A policy orders the queue (`queue_key`) and, in `schedule`, walks it and calls the
scheduler's `admit` / `preempt`: it decides, the scheduler applies. Policies keep no
state the scheduler does not hand them, except caches they can rebuild (reservations).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .base import Policy

if TYPE_CHECKING:  # pragma: no cover
    pass

_REGISTRY: dict[str, Callable[[], Policy]] = {}


def register(name: str):
    def wrap(cls):
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def policy_names() -> list[str]:
    _load()
    return sorted(_REGISTRY)


def make_policy(name: str) -> Policy:
    _load()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(sorted(_REGISTRY))}") from None


def _load() -> None:
    # Import for the side effect of registering; kept lazy to avoid import cycles.
    from . import dynamic, fifo, priority, spot_hybrid, srpt, static, tiresias  # noqa: F401


__all__ = ["Policy", "make_policy", "policy_names", "register"]
