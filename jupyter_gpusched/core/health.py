"""Health rules: lost jobs (no heartbeat), zombies, leaked GPU memory. Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .model import Job, JobState


@dataclass(frozen=True, slots=True)
class HealthConfig:
    heartbeat_timeout: float = 60.0  # a running job silent this long is lost
    start_timeout: float = 300.0  # an admitted job not running after this long is lost
    leak_threshold_mib: float = 256.0  # memory left on a GPU with no job on it


def lost_jobs(jobs: Iterable[Job], heartbeats: Mapping[str, float], now: float, cfg: HealthConfig) -> list[str]:
    """Active jobs whose runner has gone quiet past the timeout, in submission order."""
    out = []
    for job in jobs:
        if job.spec.interactive:
            continue  # a GPU kernel's reservation has no runner: its kernel's end releases it
        if job.state is JobState.RUNNING:
            last = heartbeats.get(job.id, job.started_at if job.started_at is not None else now)
            if now - last > cfg.heartbeat_timeout:
                out.append(job)
        elif job.state is JobState.ADMITTED and job.admitted_at is not None:
            if now - job.admitted_at > cfg.start_timeout:
                out.append(job)
    return [j.id for j in sorted(out, key=lambda j: j.seq)]


def zombie_processes(running_job_ids: Iterable[str], live_process_jobs: Iterable[str]) -> list[str]:
    """Processes still alive for jobs the scheduler no longer counts as active."""
    active = set(running_job_ids)
    return sorted(j for j in set(live_process_jobs) if j not in active)


def leaked_gpus(
    memory_used_mib: Mapping[tuple[str, int], float],
    allocated: Iterable[tuple[str, int]],
    cfg: HealthConfig,
) -> list[tuple[str, int]]:
    """GPUs holding memory although no job is allocated to them: fence until clean."""
    busy = set(allocated)
    return sorted(k for k, used in memory_used_mib.items() if k not in busy and used > cfg.leak_threshold_mib)
