"""Waiting until something holds: one poll loop, `wait_for`, and thin variants of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..backends.base import Backend

T = TypeVar("T")
What = str | Callable[[], str]  # a callable is asked only on timeout, so it can describe the state at the end


class WaitTimeout(AssertionError, TimeoutError):
    """What a test waited for never held. An AssertionError, so pytest reports a failed check rather than a
    crash; a TimeoutError, for the callers that catch one."""


def _timed_out(timeout: float, what: What, last_error: BaseException | None = None) -> WaitTimeout:
    described = what() if callable(what) else what
    return WaitTimeout(
        f"timed out after {timeout}s waiting for {described}" + (f" (last error: {last_error!r})" if last_error else "")
    )


def wait_for(
    check: Callable[[], T | None],
    timeout: float,
    what: What,
    interval: float = 0.2,
    *,
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    step: Callable[[float], Any] | None = None,
) -> T:
    """Call `check()` until it returns something truthy (None, False, 0 or empty: not yet); return that.

    An exception of a `retry_on` type counts as "not yet" (a server still starting refuses connections)
    and is named if time runs out; any other propagates at once. Between checks `step(interval)` runs
    (default: sleep; e.g. a service tick, then a sleep). After `timeout` seconds: WaitTimeout naming `what`."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = check()
        except retry_on as exc:
            last_error = exc
        else:
            if result:
                return result
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last_error)
        (step or time.sleep)(interval)


def wait_until(
    check: Callable[[], T | None],
    timeout: float,
    what: What,
    interval: float = 0.1,
    *,
    step: Callable[[float], Any] | None = None,
) -> T:
    """`wait_for` where an error in `check` is a bug, not "not yet": it propagates at once."""
    return wait_for(check, timeout, what, interval, retry_on=(), step=step)


async def wait_for_async(
    check: Callable[[], Awaitable[T | None]], timeout: float, what: What, interval: float = 0.1
) -> T:
    """`wait_until` for a coroutine `check`, sleeping without blocking the event loop (the server under test
    runs on it)."""
    deadline = time.monotonic() + timeout
    while True:
        result = await check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what)
        await asyncio.sleep(interval)


async def wait_for_state(api, job_id: str, states: set[str], timeout: float = 60.0) -> dict:
    """Poll a job through the plugin's `api` fixture until its state is in `states`; return it, with
    `_seen`: every state it was seen in, in order."""
    seen: list[str] = []
    last: dict = {}

    async def reached() -> dict | None:
        nonlocal last
        code, last = await api("GET", f"jobs/{job_id}")
        assert code == 200, last
        if not seen or seen[-1] != last["state"]:
            seen.append(last["state"])
        if last["state"] in states:
            last["_seen"] = seen
            return last
        return None

    return await wait_for_async(reached, timeout, lambda: f"job {job_id} (still {last['state']}, seen {seen}): {last}")


def run_to_end(backend: Backend, job_ids: set[str], timeout: float = 60.0) -> dict[str, list]:
    """Poll a backend until every job has a terminal update; return each job's updates in order."""
    updates: dict[str, list] = {j: [] for j in job_ids}
    pending = set(job_ids)

    def all_ended() -> bool:
        for u in backend.poll():
            updates.setdefault(u.job_id, []).append(u)
            if u.kind in ("succeeded", "failed"):
                pending.discard(u.job_id)
        return not pending

    wait_until(all_ended, timeout, lambda: f"jobs {pending} to finish: {updates}")
    return updates
