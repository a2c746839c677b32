"""Pipelines in the live service: jobs that wait for other jobs (`after` / `when`), and whole DAGs.

A part of `Service` (loop.py), like `ServiceViews`. The decisions are the core's
(`core/dependencies.py`); here they are applied on job-end events (each tick, and right after a
submission whose dependencies already ended), and a step is told where its dependencies' results
are (`GPUSCHED_INPUTS`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..backends.base import output_path
from ..core import Job, JobState, Scheduler, SpecError
from ..core.dependencies import Release, check_edges, settle
from .errors import JobNotFound
from .info import JobInfo, Submission

INPUTS_ENV = "GPUSCHED_INPUTS"


def new_job_id() -> str:
    return uuid.uuid4().hex[:12]


def step_job_id(pipeline_id: str, step: int) -> str:
    """The job id of step `step` of a pipeline whose id was given: the same on every server."""
    return hashlib.sha256(f"{pipeline_id}/{step}".encode()).hexdigest()[:12]


class Pipelines:
    # set by Service.__init__
    scheduler: Scheduler
    info: dict[str, JobInfo]
    jobs_dir: Path
    clock: Callable[[], float]
    enter: Callable[..., list[Job]]
    checked: Callable[..., Submission]

    def settle_dependencies(self, now: float) -> list[Job]:
        """Release WAITING jobs whose dependencies ended; cancel (cascading) those a failed or cancelled
        dependency dooms. Returns the jobs it changed, for the caller to persist."""
        jobs = self.scheduler.jobs
        waiting = [j for j in jobs.values() if j.state is JobState.WAITING]
        if not waiting:
            return []
        changed = []
        for decision in settle(waiting, {job_id: job.state for job_id, job in jobs.items()}):
            # Never before a dependency's end: an end this tick applied is stamped later than the tick's `now`.
            ends = (jobs[d].finished_at for d in jobs[decision.job_id].spec.after if d in jobs)
            at = max([now, *(e for e in ends if e is not None)])
            if isinstance(decision, Release):
                changed.append(self.scheduler.release(decision.job_id, at))
            else:
                job = self.scheduler.cancel(decision.job_id, at, actor="scheduler", reason=decision.message)
                self.info.setdefault(job.id, JobInfo()).message = decision.message
                changed.append(job)
        return changed

    def check_dependencies(self, after: Iterable[str], visible: Callable[[Job], bool]) -> None:
        """Every id in `after` names a job the submitter may see (SpecError on field `after` otherwise)."""
        for job_id in after:
            job = self.scheduler.jobs.get(job_id)
            if job is None or not visible(job):
                raise SpecError("after", f"no job {job_id!r} to wait for")

    def submit_pipeline(
        self,
        steps: Sequence[Mapping[str, Any]],
        edges: Sequence[Sequence[int]],
        owner: str,
        pipeline_id: str | None = None,
    ) -> tuple[str, list[Job]]:
        """Submit every step at once, or none (SpecError naming `steps[i].field` or `edges`). A step's
        `after` are its parents' ids, with its own `when`; returns (pipeline id, jobs in step order).
        `pipeline_id`: the id to use (a schedule's run names its slot); the steps' ids derive from it."""
        try:
            parents = check_edges(len(steps), edges)
        except ValueError as exc:
            raise SpecError("edges", str(exc)) from None
        ids = [step_job_id(pipeline_id, i) for i in range(len(steps))] if pipeline_id else [new_job_id() for _ in steps]
        pipeline_id = pipeline_id or new_job_id()
        submissions = []
        for i, step in enumerate(steps):
            try:
                sub = self.checked(owner=owner, after=[ids[p] for p in parents[i]], pipeline_id=pipeline_id, **step)
            except SpecError as exc:
                raise SpecError(f"steps[{i}].{exc.field}", f"step {i}: {exc.message}") from None
            submissions.append(sub)
        return pipeline_id, self.enter(submissions, ids)

    def pipeline(self, pipeline_id: str) -> list[Job]:
        """A pipeline's jobs in step order (JobNotFound if there is none)."""
        steps = sorted(
            (j for j in self.scheduler.jobs.values() if j.spec.pipeline_id == pipeline_id), key=lambda j: j.seq
        )
        if not steps:
            raise JobNotFound(pipeline_id)
        return steps

    def inputs_environment(self, job: Job) -> dict[str, str]:
        """GPUSCHED_INPUTS for a job with dependencies: for each, its id, name, executed notebook and folder."""
        if not job.spec.after:
            return {}
        inputs = []
        for dep_id in job.spec.after:
            dep = self.scheduler.jobs.get(dep_id)
            info = self.info.get(dep_id)
            folder = Path(info.job_dir) if info is not None and info.job_dir else self.jobs_dir / dep_id
            inputs.append(
                {
                    "id": dep_id,
                    "name": Path(dep.spec.notebook).stem if dep is not None else dep_id,
                    "state": dep.state.value if dep is not None else None,
                    "notebook": str(output_path(folder)),
                    "output_dir": str(folder),
                }
            )
        return {INPUTS_ENV: json.dumps(inputs)}
