"""Per-tenant quota and burst.

A tenant's `quota` GPUs are guaranteed. Beyond it a tenant may borrow idle GPUs up to
`burst` more; a job admitted past the quota is marked borrowed and may be preempted
(reclaimed) when a tenant still under its quota needs the GPUs back.

Interactive requests (GPU kernels) are never borrowed: a borrowed GPU is taken back by
preemption, and a live kernel is not preempted. They run within the quota, and within the
tenant's interactive cap (`Tenant.interactive_cap`) counted over its interactive requests only.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping

from .model import Tenant


class Admission(enum.Enum):
    WITHIN_QUOTA = "quota"
    BORROW = "borrow"
    OVER_LIMIT = "over-limit"


class QuotaLedger:
    def __init__(self, tenants: Iterable[Tenant] = (), allow_borrowing: bool = True, unknown_burst: int | None = None):
        self.tenants: dict[str, Tenant] = {t.name: t for t in tenants}
        self.allow_borrowing = allow_borrowing
        self._unknown_burst = unknown_burst
        self._unknown: dict[str, Tenant] = {}  # terms of tenants never configured (not registered)
        self.used: dict[str, int] = {}
        self.borrowed: dict[str, int] = {}
        # Tenants past their budget -> "soft" (may not borrow) or "hard" (nothing new starts).
        self.over_budget: dict[str, str] = {}
        self.interactive: dict[str, int] = {}  # GPUs held by interactive requests

    def tenant(self, name: str) -> Tenant:
        """The tenant's terms; one never configured has no quota and may only borrow."""
        t = self.tenants.get(name)
        if t is None:
            # Not stored in `tenants`: looking at a rejected spec must not configure its tenant.
            t = self._unknown.get(name)
            if t is None:
                t = self._unknown[name] = Tenant(name, 0, self._unknown_burst)
        return t

    def limit(self, name: str) -> float:
        t = self.tenant(name)
        return t.limit if self.allow_borrowing else t.quota

    def classify(self, name: str, gpus: int, interactive: bool = False) -> Admission:
        t = self.tenant(name)
        budget = self.over_budget.get(name)
        if budget == "hard":
            return Admission.OVER_LIMIT
        after = self.used.get(name, 0) + gpus
        if interactive:
            fits = after <= t.quota and self.interactive.get(name, 0) + gpus <= t.interactive_cap
            return Admission.WITHIN_QUOTA if fits else Admission.OVER_LIMIT
        if after <= t.quota:
            return Admission.WITHIN_QUOTA
        if self.allow_borrowing and budget is None and after <= t.limit:
            return Admission.BORROW
        return Admission.OVER_LIMIT

    def admissible(self, name: str) -> float:
        """The largest batch (not interactive) job of `name` that is not OVER_LIMIT now: `classify`
        for every size at once."""
        t = self.tenant(name)
        budget = self.over_budget.get(name)
        if budget == "hard":
            return -math.inf
        used = self.used.get(name, 0)
        if self.allow_borrowing and budget is None:
            return max(t.quota, t.limit) - used
        return t.quota - used

    def charge(self, name: str, gpus: int, borrowed: bool, interactive: bool = False) -> None:
        self.used[name] = self.used.get(name, 0) + gpus
        if borrowed:
            self.borrowed[name] = self.borrowed.get(name, 0) + gpus
        if interactive:
            self.interactive[name] = self.interactive.get(name, 0) + gpus

    def refund(self, name: str, gpus: int, borrowed: bool, interactive: bool = False) -> None:
        self.used[name] = self.used.get(name, 0) - gpus
        if borrowed:
            self.borrowed[name] = self.borrowed.get(name, 0) - gpus
        if interactive:
            self.interactive[name] = self.interactive.get(name, 0) - gpus

    def snapshot(self) -> Mapping[str, dict]:
        names = sorted(set(self.tenants) | set(self.used))
        return {
            n: {
                "quota": self.tenant(n).quota,
                "burst": self.tenant(n).burst,
                "used": self.used.get(n, 0),
                "borrowed": self.borrowed.get(n, 0),
                "interactive": self.interactive.get(n, 0),
                "interactive_cap": self.tenant(n).interactive_cap,
            }
            for n in names
        }
