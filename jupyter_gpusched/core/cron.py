"""Cron times for recurring schedules: the next runs of a 5-field cron expression in a time zone.

Pure: times are epoch seconds handed in. `croniter` parses and steps; the zone (zoneinfo) makes it
DST-correct: "30 2 * * *" in Europe/Berlin runs at 02:30 local time all year. A local time that
does not exist (the spring-forward hour) runs at the first valid minute after it (03:00); a local
time that happens twice (the autumn fall-back hour) runs once, at its first occurrence.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

MAX_CRON_CHARS = 200


class CronError(ValueError):
    """A cron expression or time zone the scheduler cannot use; `field` names which."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (e.g. "Europe/Berlin", "UTC"), or CronError."""
    if not isinstance(name, str) or not name or len(name) > 64 or ".." in name or name.startswith("/"):
        raise CronError("timezone", f"unknown time zone {str(name)[:64]!r}; use an IANA name such as Europe/Berlin")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(
            "timezone", f"unknown time zone {name!r}; use an IANA name such as Europe/Berlin or UTC"
        ) from None


def check_cron(expr: str) -> str:
    """A valid 5-field cron expression (minute hour day-of-month month day-of-week), normalised."""
    if not isinstance(expr, str) or not expr.strip():
        raise CronError("cron", "cron must be a 5-field cron expression such as '0 2 * * *'")
    expr = " ".join(expr.split())
    if len(expr) > MAX_CRON_CHARS or len(expr.split(" ")) != 5 or not croniter.is_valid(expr):
        raise CronError(
            "cron",
            f"{expr[:60]!r} is not a valid cron expression; use 5 fields: minute hour day-of-month month "
            "day-of-week, e.g. '0 2 * * *' (every day at 02:00)",
        )
    return expr


def runs_after(expr: str, tz: str, after: float) -> Iterator[float]:
    """Run times (epoch seconds) strictly after `after`, in order, endless."""
    it = croniter(expr, datetime.fromtimestamp(after, zone(tz)))
    last_wall: datetime | None = None
    while True:
        when = it.get_next(datetime)
        wall = when.replace(tzinfo=None)
        if wall == last_wall:  # the fall-back hour's second 02:30: one run per local time
            continue
        last_wall = wall
        yield when.timestamp()


def next_runs(expr: str, tz: str, after: float, count: int) -> list[float]:
    runs = runs_after(expr, tz, after)
    return [next(runs) for _ in range(count)]


def latest_due(expr: str, tz: str, after: float, now: float) -> tuple[float | None, int]:
    """The latest run time in (after, now] and how many there are in that span (counted up to 1000)."""
    latest, count = None, 0
    for when in runs_after(expr, tz, after):
        if when > now:
            break
        latest, count = when, count + 1
        if count >= 1000:  # a long outage of an every-minute schedule: jump to the last slot
            it = croniter(expr, datetime.fromtimestamp(now, zone(tz)))
            latest = it.get_prev(datetime).timestamp()
            break
    return latest, count
