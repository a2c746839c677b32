"""How a run ended, as the runner leaves it in its job folder: the one record a restarted server trusts.

The runner writes `exit.json` once the notebook has run to its end (or failed on its own, or its
kernel never came up: "not_started"), before it exits: `{"status": "succeeded" | "failed" | "not_started", "message", "time", "started", "exit_code",
"cells_done", "cells_total", "token"}`. The write is atomic and durable (temp file, fsync,
rename, fsync of the folder), so a server that was down when the run ended reads the true
outcome instead of guessing from a dead process, and a finished job is never run again.

A run that was interrupted (killed by a signal before its cells were done) leaves no record:
it did not finish and will be re-run by its retry policy. `token` is the launch's token
(`GPUSCHED_LAUNCH_TOKEN`), so a record is only believed for the launch it belongs to.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

EXIT_RECORD = "exit.json"
LAUNCH_INFO = "launch.json"  # written by LocalBackend.launch (see base.py's job folder layout)


ExitStatus = Literal["succeeded", "failed", "not_started"]
EXIT_STATUSES = ("succeeded", "failed", "not_started")
# The runner's exit code when its kernel could not start: a launch failure, not the notebook's (the Kubernetes
# backend reads it from the pod, where no exit record reaches the service).
EXIT_NOT_STARTED = 4


@dataclass(frozen=True)
class ExitRecord:
    status: ExitStatus
    message: str  # "" on success; one readable line on failure
    time: float  # wall clock when the run ended
    started: float | None = None  # wall clock when the runner started
    exit_code: int | None = None
    cells_done: int | None = None
    cells_total: int | None = None
    token: str | None = None  # the launch this run belongs to

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"

    @property
    def progress(self) -> tuple[int, int] | None:
        if isinstance(self.cells_done, int) and isinstance(self.cells_total, int):
            return self.cells_done, self.cells_total
        return None


def exit_record_path(job_dir: Path) -> Path:
    return Path(job_dir) / EXIT_RECORD


def write_durable(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, and make it survive a crash of the machine too."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # the rename itself lives in the folder
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_exit_record(job_dir: Path, record: ExitRecord) -> None:
    write_durable(exit_record_path(job_dir), json.dumps(asdict(record)))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _launch_info(job_dir: Path) -> dict:
    data = _read_json(Path(job_dir) / LAUNCH_INFO)
    return data if isinstance(data, dict) else {}


def read_exit_record(job_dir: Path) -> ExitRecord | None:
    """The record of the current launch in `job_dir`, or None (no record, unreadable, or one left by an
    earlier launch)."""
    data = _read_json(exit_record_path(job_dir))
    if not isinstance(data, dict) or data.get("status") not in EXIT_STATUSES:
        return None
    if not isinstance(data.get("time"), (int, float)):
        return None
    launched = _launch_info(job_dir).get("token")
    if launched and data.get("token") and launched != data.get("token"):
        return None  # an earlier launch's record
    known = set(ExitRecord.__dataclass_fields__)
    try:
        return ExitRecord(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None


def launched_since(job_dir: Path, since: float | None) -> bool:
    """Did a launch into `job_dir` start at or after `since` (the job's admission)? False when the folder
    holds no launch, or only an earlier attempt's."""
    started = _launch_info(job_dir).get("time")
    if not isinstance(started, (int, float)):
        # launch.json is written just after the runner starts, and the runner writes its pid itself: a pid
        # without launch.json is a launch the server died in the middle of (launch removes an old pid first).
        return (Path(job_dir) / "pid").exists()
    return since is None or started >= since
