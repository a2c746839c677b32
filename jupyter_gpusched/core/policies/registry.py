"""Policies by name: each policy module registers its class here when imported."""

from __future__ import annotations

from collections.abc import Callable

from .base import Policy

REGISTRY: dict[str, Callable[[], Policy]] = {}


def register(name: str):
    """Class decorator: make the policy available as `name` (and set its `name`)."""

    def wrap(cls):
        cls.name = name
        REGISTRY[name] = cls
        return cls

    return wrap
