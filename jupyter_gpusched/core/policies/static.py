from __future__ import annotations

from .base import Policy, admit_in_order, tenant_group
from .registry import register


@register("static")
class StaticPolicy(Policy):
    """Fixed per-tenant partitions: each tenant runs FIFO within its quota and never
    borrows, so a busy tenant waits while another tenant's GPUs sit idle. The baseline."""

    allow_borrowing = False

    def queue_group(self):
        return tenant_group

    def schedule(self, s, now):
        admit_in_order(s, now, per_tenant=True, respect_quota=True)
