"""Learned runtime estimates in the live service (the estimator is core/estimates.py).

Each succeeded job's run time (GPU service per GPU, every attempt) goes into the history and the
keys it changed into the store (store/estimates.py), so a restart keeps what was learned. Before
each scheduling pass every job not yet ended gets `JobSpec.learned_runtime` from the history: a
queued job's follows the history as it grows, a job that already holds GPUs keeps the one it had
(or gets one, after a restart). The scheduler's backfill and the API's estimated start read it
through `JobSpec.runtime_estimate` (capped at max_runtime).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..core import Job, JobState, Scheduler
from ..core.estimates import Estimate, RuntimeHistory
from ..core.model import Event
from ..store import Store

log = logging.getLogger("jupyter_gpusched")


class Estimates:
    def __init__(self, store: Store, clock: Callable[[], float], history: RuntimeHistory | None = None):
        self.store = store
        self.clock = clock
        self.history = history or RuntimeHistory()
        self.by_job: dict[str, Estimate] = {}  # job id -> the estimate its learned_runtime came from

    def load(self) -> None:
        self.history.load(self.store.runtimes.load(self.history.max_keys))

    def feed(self, events: Iterable[Event], jobs: Mapping[str, Job]) -> None:
        """Learn from the jobs these events finished (after they were recorded)."""
        changed: set[str] = set()
        for e in events:
            job = jobs.get(e.job_id)
            if e.dst is JobState.SUCCEEDED and job is not None:
                changed.update(self.history.observe_job(job))
        if changed:
            try:
                self.store.runtimes.save(((k, self.history.runs(k)) for k in sorted(changed)), self.clock())
            except Exception:  # a lost write costs a little learning, never a job
                log.exception("could not save the learned runtime history")

    def refresh(self, scheduler: Scheduler) -> None:
        """Set learned_runtime on queued and active jobs (queued ones follow the history)."""
        memo: dict[tuple, Estimate | None] = {}  # jobs alike (a notebook's queued runs) share one answer
        for job in [*scheduler.queue, *scheduler.active.values()]:
            spec = job.spec
            if spec.interactive:
                continue
            if job.state.holds_gpus and job.id in self.by_job:
                continue  # its run was planned on this estimate
            alike = (spec.owner, spec.notebook, spec.gpus, spec.tenant)
            if alike not in memo:
                memo[alike] = self.history.estimate(spec)
            est = memo[alike]
            seconds = est.seconds if est is not None else None
            if est is not None:
                self.by_job[job.id] = est
            else:
                self.by_job.pop(job.id, None)
            scheduler.set_learned_runtime(job, seconds)

    def describe(self, job: Job) -> dict[str, Any]:
        """The API's `runtime_estimate`: seconds, source (learned | max_runtime | None), basis, samples."""
        spec = job.spec
        est = self.by_job.get(job.id)
        if spec.learned_runtime is not None and (spec.max_runtime is None or spec.learned_runtime < spec.max_runtime):
            return {
                "seconds": spec.learned_runtime,
                "source": "learned",
                "basis": est.basis if est is not None else None,
                "samples": est.samples if est is not None else None,
            }
        if spec.max_runtime is not None:
            return {"seconds": spec.max_runtime, "source": "max_runtime", "basis": None, "samples": None}
        return {"seconds": None, "source": None, "basis": None, "samples": None}
