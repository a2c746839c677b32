"""Kills in progress: a job's processes are stopped on a worker thread, never on the event loop.

Stopping a local job means SIGTERM, a grace period (`LocalBackend.kill_grace`, 3 s) and SIGKILL; waited out
on the event loop, four jobs that ignore SIGTERM froze every request of the Jupyter server for 12 s. So the
service asks the backend for the fast half of a kill (`begin_kill`: forget the job, so no news of it
arrives afterwards) and runs the slow half here. Until that is done the job's GPUs stay taken: the service
launches nothing onto them (`blocks`), so two jobs never share a GPU, not even for a grace period.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor

from ..backends.base import Backend

log = logging.getLogger("jupyter_gpusched")

Gpu = tuple[str, int]  # (node, GPU index)


class Kills:
    def __init__(self, backend: Backend, wake: Callable[[], None]):
        self.backend = backend
        self._wake = wake  # called from the kill thread when one is done (must be thread-safe)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="gpusched-kill")
        self._running: dict[str, tuple[Future, frozenset[Gpu]]] = {}  # job id -> (the kill, its GPUs)

    def start(self, job_id: str, reason: str, gpus: Iterable[Gpu], *, preempt: bool = False) -> None:
        """Stop `job_id`, whose processes run on `gpus`, without waiting for them to die. A preemption warns
        the job first (`Backend.begin_preempt`: a signal and a grace period to save a checkpoint)."""
        begin = self.backend.begin_preempt if preempt else self.backend.begin_kill
        finish = begin(job_id, reason)
        if finish is None:  # nothing left to wait for
            return
        future = self._pool.submit(finish)
        self._running[job_id] = (future, frozenset(gpus))
        future.add_done_callback(self._done)

    def _done(self, future: Future) -> None:
        exc = future.exception()
        if exc is not None:
            log.error("stopping a job's processes failed: %s", exc)
        self._wake()

    def settle(self) -> None:
        """Forget the kills that are over (their GPUs are free again)."""
        for job_id, (future, _) in list(self._running.items()):
            if future.done():
                del self._running[job_id]

    def blocks(self, job_id: str, gpus: Iterable[Gpu]) -> bool:
        """Must a launch of `job_id` onto `gpus` wait (the job itself, or a job on one of them, is still dying)?"""
        if job_id in self._running:
            return True
        wanted = set(gpus)
        return any(held & wanted for _, held in self._running.values())

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._running

    async def drain(self, timeout: float) -> None:
        """Wait (on the loop, without blocking it) for the kills in progress, then stop the worker threads."""
        pending = [asyncio.wrap_future(f) for f, _ in self._running.values()]
        if pending:
            await asyncio.wait(pending, timeout=timeout)
        self._pool.shutdown(wait=False)
