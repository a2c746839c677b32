"""What the backend's threads share: one tracker per job, the caches, the news for the next poll.

Threads: the service's loop (launch, kill, poll), the watchers (caches), the workers (API writes) and the
log thread. All of them take `SharedState.lock` before touching anything here; the job log has a lock of
its own, always taken after that one.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..base import BackendUpdate, UpdateKind, log_path
from ..logcap import trim_log
from .watch import ClusterCache


@dataclass
class Tracked:
    """What the service last asked of one job, and what the backend has seen and said of it."""

    job_id: str
    name: str
    namespace: str
    want: str  # "run" | "suspend" | "delete" | "done"
    node: str | None = None
    pool: str | None = None
    spot: bool = False
    attempt: int = 0
    manifests: tuple[dict, dict] | None = None  # to create the Job (None for adopted jobs)
    job_dir: Path | None = None
    adopted: bool = False
    seen: bool = False  # a Job for it was seen in the cluster since we track it
    started_attempt: int = -1
    last_beat: float = 0.0
    backoff: float = 0.0
    recreate: bool = False  # deleting a failed Job so it can be created afresh
    reported_final: bool = False
    nodes: tuple[str, ...] = ()  # a gang's nodes (more than one: see `gang`); () for a one-pod job
    extras: tuple[dict, ...] = ()  # objects the Job owns besides its ConfigMap: a gang's Service, the upload Secret
    extras_made: bool = False
    checkpoint_at: float | None = None  # the notebook's last save, as its pod log reported it (podlogs)
    kueue: bool = False  # Kueue admits its Job (kueue.py): the workers create it and leave `suspend` to Kueue


class SharedState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.tracked: dict[str, Tracked] = {}
        self.cache = ClusterCache()
        self.updates: list[BackendUpdate] = []  # news for the next poll()
        self._file_lock = threading.Lock()  # appends to log.txt (taken after self.lock, never before)

    def report(self, t: Tracked, kind: UpdateKind, message: str = "", want: str = "done") -> None:
        """The news that ends this run of the job (lock held): nothing more is said of it until it is launched
        again; `want` is what the workers do with its Job meanwhile."""
        t.want, t.reported_final = want, True
        self.updates.append(BackendUpdate(t.job_id, kind, time.time(), message))

    def note(self, t: Tracked, line: str) -> None:
        """A line from the backend in the job's log.txt (for jobs this service launched)."""
        if t.job_dir is None:
            return
        self.append_log(t.job_dir, f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: {line}\n".encode())

    def append_log(self, job_dir: Path, data: bytes, max_bytes: int = 0) -> None:
        """Append to the job's log.txt, then trim it to `max_bytes` (0: no cap) under the same lock."""
        try:
            with self._file_lock:
                job_dir.mkdir(parents=True, exist_ok=True)
                with open(log_path(job_dir), "ab") as f:
                    f.write(data)
                trim_log(log_path(job_dir), max_bytes)
        except OSError:
            pass
