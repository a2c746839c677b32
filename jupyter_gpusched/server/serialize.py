"""The JSON shapes of the API: timestamps and jobs."""

from __future__ import annotations

from typing import Any

from ..core import JobState
from ..service import JobInfo, Service
from ..service.notify_targets import targets_from_dicts
from ..service.views import iso

__all__ = ["iso", "job_detail_json", "job_json", "pipeline_json"]


def job_json(service: Service, job) -> dict[str, Any]:
    """A job as the list shows it."""
    s = job.spec
    info = service.info.get(job.id)
    out: dict[str, Any] = {
        "id": job.id,
        "state": job.state.value,
        "notebook": s.notebook,
        "gpus": s.gpus,
        "priority": s.priority.label,
        "tenant": s.tenant,
        "owner": s.owner,
        "created": iso(job.submitted_at),
        "started": iso(job.first_started_at),
        "finished": iso(job.finished_at),
        "reason": job.reason,
        "preemptible": s.preemptible,
        "interactive": s.interactive,
        "max_runtime": s.max_runtime,
        "runtime_estimate": service.estimates.describe(job),
        "allocation": [{"node": node, "gpus": list(ids)} for node, ids in job.allocation],
        "borrowed": job.borrowed,
        "attempts": job.attempts,
        "preemptions": job.preemptions,
        "progress": info.progress if info is not None else None,
        "message": info.message if info is not None else "",
        "stalled_since": iso(info.stalled_since) if info is not None else None,
        "waiting_on_data": _waiting_on_data(info),
        "after": list(s.after),
        "when": s.when,
        "pipeline_id": s.pipeline_id,
        "schedule_id": s.schedule_id,
    }
    return out


def job_detail_json(service: Service, job, start: float | None) -> dict[str, Any]:
    """A job as its own page shows it: the list's fields and the rest. `start` is its estimated start,
    awaited first (`Service.estimated_start` runs off the event loop, and the job may move meanwhile)."""
    s = job.spec
    info = service.info.get(job.id)
    queued = job.state is JobState.QUEUED
    out = job_json(service, job)
    out["parameters"] = dict(s.parameters)
    out["max_retries"] = s.max_retries
    out["gpu_type"] = s.gpu_type
    out["cpus"] = s.cpus
    out["memory"] = s.memory
    out["position"] = service.position(job) if queued else None
    out["estimated_start"] = iso(start) if queued else None
    out["stall_timeout"] = info.stall_timeout if info is not None else None
    out["checkpoint_interval"] = s.checkpoint_interval
    out["notify"] = [t.public() for t in targets_from_dicts(info.notify if info is not None else None)]
    out["notified"] = list(info.notified) if info is not None else []
    out["activity"] = info.activity if info is not None else None
    out["gpu_hours"] = {
        "allocated": round(info.gpu_s / 3600, 4) if info is not None else 0.0,
        "idle": round(info.idle_gpu_s / 3600, 4) if info is not None else 0.0,
        "waiting_on_data": round(info.data_wait_gpu_s / 3600, 4) if info is not None else 0.0,
    }
    return out


DATA_HINT = (
    "its GPUs wait on data: more data-loader workers, a local dataset cache, or prefetching may help "
    "(docs/stalls.md#waiting-on-data)"
)


def _waiting_on_data(info: JobInfo | None) -> dict[str, Any] | None:
    if info is None or info.waiting_on_data is None:
        return None
    return {**info.waiting_on_data, "hint": DATA_HINT}


def pipeline_json(service: Service, pipeline_id: str, steps: list) -> dict[str, Any]:
    """A pipeline: its steps (jobs, in step order), the edges between them, and one overall state."""
    index = {job.id: i for i, job in enumerate(steps)}
    edges = [[index[dep], i] for i, job in enumerate(steps) for dep in job.spec.after if dep in index]
    steps_json = [job_json(service, j) for j in steps]
    return {"id": pipeline_id, "state": pipeline_state(steps), "steps": steps_json, "edges": edges}


def pipeline_state(steps: list) -> str:
    """One state for a pipeline's steps: WAITING (none started), RUNNING, SUCCEEDED, FAILED (a step
    failed), or CANCELLED (every step ended, none failed, some were cancelled: a user stopped it)."""
    states = {job.state for job in steps}
    if all(state.terminal for state in states):
        if states == {JobState.SUCCEEDED}:
            return "SUCCEEDED"
        return "CANCELLED" if states <= {JobState.SUCCEEDED, JobState.CANCELLED} else "FAILED"
    return "WAITING" if states <= {JobState.WAITING, JobState.QUEUED} else "RUNNING"
