"""Scheduling policies, all behind one interface.

A policy orders the queue (`queue_key`) and, in `schedule`, walks it and calls the
scheduler's `admit` / `preempt`: it decides, the scheduler applies. Policies keep no
state the scheduler does not hand them, except caches they can rebuild (reservations).
"""

from __future__ import annotations

from .base import Policy
from .registry import REGISTRY, register


def policy_names() -> list[str]:
    _load()
    return sorted(REGISTRY)


def make_policy(name: str) -> Policy:
    _load()
    try:
        return REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose one of {', '.join(sorted(REGISTRY))}") from None


def _load() -> None:
    # Import for the side effect of registering (in .registry, which the policy modules
    # import, so none of them imports this package); lazy, so the core loads fast.
    from . import dynamic, fifo, priority, spot_hybrid, srpt, static, tiresias  # noqa: F401


__all__ = ["Policy", "make_policy", "policy_names", "register"]
