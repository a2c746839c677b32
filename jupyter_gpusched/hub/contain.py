"""Multi-user mode: a job runs the notebook that was checked at submission, or none.

A submitted path is resolved (links followed) and checked to lie inside the user's folder
when it is submitted; the job keeps that resolved path. A queued job starts later, and by
then its owner may have replaced the file, or a folder on its path, with a link to someone
else's notebook. `ContainedBackend` wraps the real backend and refuses to launch a job
whose path no longer resolves to itself (`LaunchRefused`: no retry); the service then fails
the job with that reason. The rule is `backends/containment.py`'s, which the service applies to
every launch too; this wrapper checks once more right before the backend starts the job.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..backends.base import LaunchRefused
from ..backends.containment import notebook_at_launch


class ContainedBackend:
    """The backend, unchanged but for `launch`, which checks the notebook path first."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def launch(self, request) -> Any:
        spec = getattr(request, "spec", None)
        if spec is not None and Path(spec.notebook).is_absolute():
            # the service's own check (the same rule), again right before the backend starts it
            if notebook_at_launch("/", spec.notebook) != Path(request.notebook):
                raise LaunchRefused(f"the notebook {spec.notebook} is not the file the job was given; submit it again")
        return self._inner.launch(request)
