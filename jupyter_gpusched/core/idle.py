"""Idle reclaim of GPU kernels: when a kernel that holds GPUs and runs nothing is warned, then stopped.

Pure: the driver (server/provisioner.py) hands in the kernel's last activity, whether it is busy, whether
anyone waits for GPUs, and the clock. Rules (docs/interactive.md):
- a busy kernel is never reclaimed, and its clock restarts when it goes idle again;
- only when someone waits for GPUs (unless `only_when_waiting` is off);
- idle for `timeout` seconds: warned; `warn_for` seconds later, still idle: reclaimed (shut down);
- "keep" restarts the clock, but a kernel's keeps extend it by at most `max_keep` seconds in all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class IdleAction(enum.Enum):
    NONE = "none"
    WARN = "warn"
    RECLAIM = "reclaim"


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    timeout: float = 0.0  # seconds idle before the warning; 0: never reclaim
    warn_for: float = 600.0  # seconds between the warning and the reclaim
    max_keep: float = 8 * 3600.0  # seconds "keep" may add in all
    only_when_waiting: bool = True

    @property
    def enabled(self) -> bool:
        return self.timeout > 0


@dataclass(slots=True)
class IdleClock:
    """One kernel's idle bookkeeping (the driver keeps one per GPU kernel)."""

    idle_since: float
    warned_at: float | None = None
    kept: float = 0.0  # seconds "keep" has added so far

    def activity(self, at: float) -> None:
        """The kernel ran something (or is running it): the clock starts again, any warning is void."""
        if at > self.idle_since:
            self.idle_since = at
            self.warned_at = None

    def keep(self, now: float, policy: IdlePolicy) -> float:
        """The user's "keep": restart the clock within what `max_keep` leaves. Returns the seconds added."""
        added = min(max(0.0, now - self.idle_since), max(0.0, policy.max_keep - self.kept))
        self.idle_since += added
        self.kept += added
        if added > 0:
            self.warned_at = None
        return added


def idle_action(clock: IdleClock, now: float, busy: bool, someone_waits: bool, policy: IdlePolicy) -> IdleAction:
    """What to do with one GPU kernel now. WARN is answered once per idle spell; the driver stamps `warned_at`."""
    if not policy.enabled:
        return IdleAction.NONE
    if busy:
        clock.activity(now)
        return IdleAction.NONE
    if policy.only_when_waiting and not someone_waits:
        clock.warned_at = None  # nobody needs the GPUs: no countdown runs
        return IdleAction.NONE
    if clock.warned_at is not None:
        return IdleAction.RECLAIM if now - clock.warned_at >= policy.warn_for else IdleAction.NONE
    return IdleAction.WARN if now - clock.idle_since >= policy.timeout else IdleAction.NONE
