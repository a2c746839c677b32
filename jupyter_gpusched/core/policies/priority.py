from __future__ import annotations

from ..queues import strict_priority_key
from .base import Policy, admit_in_order
from .registry import register


@register("priority")
class PriorityPolicy(Policy):
    """Strict priority classes (FIFO within a class), no aging: low priority can starve."""

    def queue_key(self, config):
        return strict_priority_key

    def schedule(self, s, now):
        admit_in_order(s, now, per_tenant=False, respect_quota=False)
