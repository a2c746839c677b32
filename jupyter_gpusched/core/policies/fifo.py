from __future__ import annotations

from .base import Policy, admit_in_order
from .registry import register


@register("fifo")
class FifoPolicy(Policy):
    """One line for everybody in submit order; the head blocks the rest. No quotas."""

    def schedule(self, s, now):
        admit_in_order(s, now, per_tenant=False, respect_quota=False)
