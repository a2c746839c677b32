"""Multi-user mode: a job runs the notebook that was checked at submission, or none.

A submitted path is resolved (links followed) and checked to lie inside the user's folder
when it is submitted; the job keeps that resolved path. A queued job starts later, and by
then its owner may have replaced the file, or a folder on its path, with a link to someone
else's notebook. `ContainedBackend` wraps the real backend and refuses to launch a job
whose path no longer resolves to itself (`LaunchRefused`: no retry); the service then fails
the job with that reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..backends.base import LaunchRefused


class ContainedBackend:
    """The backend, unchanged but for `launch`, which checks the notebook path first."""

    def __init__(self, inner: Any):
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def launch(self, request) -> Any:
        spec = getattr(request, "spec", None)
        submitted = Path(spec.notebook) if spec is not None else None
        if submitted is not None and submitted.is_absolute():
            now = Path(request.notebook)
            if now != submitted or submitted.resolve() != submitted:
                raise LaunchRefused(
                    f"the notebook {submitted} is no longer the file checked at submission (it or a folder on its "
                    "path was replaced by a link); submit it again"
                )
        return self._inner.launch(request)
