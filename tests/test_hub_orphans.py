"""Which GPU kernels' reservations the hub service releases (hub/orphans.py `orphaned`): those of a user
with no running server started before the request. The real Hub case is in tests/test_hub_kernels.py."""

from __future__ import annotations

from jupyter_gpusched.core import JobSpec, JobState
from jupyter_gpusched.core.model import Job
from jupyter_gpusched.hub.orphans import orphaned, started_at

T = 1_800_000_000.0  # the requests' submission time
BEFORE, AFTER = "2027-01-15T07:59:00.000000Z", "2027-01-15T08:01:00.000000Z"  # T is 08:00:00 UTC


def request(owner: str, interactive: bool = True, state: JobState = JobState.RUNNING) -> Job:
    spec = JobSpec(notebook="kernel:k", owner=owner, interactive=interactive)
    return Job(id=f"{owner}-{interactive}-{state.value}", spec=spec, submitted_at=T, seq=0, state=state)


def test_started_at_reads_the_hubs_timestamps():
    assert started_at({"started": "2027-01-15T08:00:00.000000Z"}) == T
    assert started_at({"started": None}) is None


def test_only_requests_without_a_server_from_before_them_are_released():
    jobs = [request(u) for u in ("live", "gone", "restarted", "pending", "named", "unknown")]
    servers = {
        "live": {"": {"started": BEFORE}},
        "gone": {},  # no running server (or the user was deleted)
        "restarted": {"": {"started": AFTER}},  # a new server: the kernel went with the old one
        "pending": {"": {"started": None, "pending": "spawn"}},
        "named": {"": {"started": AFTER}, "gpu": {"started": BEFORE}},  # an older named server may hold it
        # "unknown": the Hub gave no clear answer: not judged
    }
    released = {j.spec.owner for j in orphaned(jobs, servers)}
    assert released == {"gone", "restarted", "pending"}


def test_jobs_and_ended_requests_are_never_released():
    jobs = [request("gone", interactive=False), request("gone", state=JobState.CANCELLED)]
    assert orphaned(jobs, {"gone": {}}) == []
    assert orphaned([request("gone", state=JobState.QUEUED)], {"gone": {}})  # a waiting one is
