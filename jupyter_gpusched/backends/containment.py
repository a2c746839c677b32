"""At launch: the notebook a job runs is still the file that was checked when it was submitted.

At submit the REST API resolves the notebook's path (links followed), checks that it lies inside
the server root (single-user) or the user's folder (hub), and the job keeps that resolved path:
relative to the resolved root, or absolute in hub mode. A queued job starts later, and by then
the file, or a folder on its path, may have been replaced by a link to a file outside. So at
launch the path is resolved again and must come out unchanged: any link on it now means it was
swapped, and the job is refused (`LaunchRefused`: it fails at once, with the reason). Both the
service (every backend, single-user and hub) and the hub's backend wrapper apply this one rule.
"""

from __future__ import annotations

import os
from pathlib import Path

from .base import LaunchRefused


def notebook_at_launch(root: str | Path, submitted: str | Path) -> Path:
    """The absolute path to run for a job whose notebook was `submitted` (relative to `root`, or
    absolute), or LaunchRefused if it no longer resolves to itself inside `root`."""
    real_root = os.path.realpath(root)
    path = Path(real_root, submitted)  # an absolute `submitted` (hub mode) stays itself
    if ".." in path.parts:
        raise LaunchRefused(f"the notebook path {submitted} leaves its folder")
    try:
        real = os.path.realpath(path, strict=True)
    except FileNotFoundError:
        return path  # gone: the backend says "notebook not found" (and the service retries), as before
    except (OSError, RuntimeError, ValueError) as exc:  # a link loop, a name too long ...
        raise LaunchRefused(f"the notebook {submitted} cannot be opened safely: {exc}") from None
    if real != str(path):
        raise LaunchRefused(
            f"the notebook {submitted} is no longer the file checked at submission (it or a folder on its "
            "path was replaced by a link); submit it again"
        )
    if not Path(submitted).is_absolute() and not Path(real).is_relative_to(real_root):
        raise LaunchRefused(f"the notebook {submitted} is outside the server root")
    return path
