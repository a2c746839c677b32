"""Bringing a job's kernel up on a busy machine: start slots, a load-scaled deadline, no port races.

Many runners started at once (a burst at 40-way on 2 cores) each start an ipykernel, which costs about a second
of CPU before it answers `kernel_info`; started together they starve each other past any timeout. So:

- **Start slots.** A runner takes one of `max_starts` slots (an exclusive `flock` on one of the files
  `slot-0 ... slot-N-1` in a folder its runners share) before it imports papermill and launches its kernel, and
  gives it back once the kernel answered `kernel_info` (or the start failed): a burst's runners wait as small
  processes, not as 40 interpreters importing at once. A runner that dies gives its slot back with its last file
  descriptor, so a slot is never leaked. The wait for a slot is not part of the deadline.
- **A deadline that scales with load.** From its launch (the slot held), the kernel has `base` seconds times
  the machine's load per CPU (at least 1, at most `MAX_LOAD_FACTOR`) to answer; past it the run is a launch
  failure (the service puts the job back in line), not the notebook's.
- **No port races.** On POSIX the kernel talks over `ipc` (Unix sockets named after its connection file, which
  is unique), so two kernels started at the same instant never pick the same TCP port; `tcp` remains for the
  platforms without it, with jupyter_client's port cache.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path

MAX_LOAD_FACTOR = 4.0  # the deadline grows with the load up to this many times the base
SLOT_POLL = 0.05  # seconds between tries for a free slot
SOCKET_PATH_LIMIT = 100  # bytes; sun_path holds 104 (macOS) to 108 (Linux) with the "-N" suffix

try:
    import fcntl
except ImportError:  # Windows: no flock; starts are not bounded there
    fcntl = None  # type: ignore[assignment]


def default_max_starts() -> int:
    """Kernels brought up at once by default: one per CPU, at least 2."""
    return max(2, os.cpu_count() or 1)


def load_factor() -> float:
    """The 1-minute load per CPU, clamped to [1, MAX_LOAD_FACTOR] (1 where the OS does not tell)."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 1.0
    return min(MAX_LOAD_FACTOR, max(1.0, load / (os.cpu_count() or 1)))


def start_deadline(base: float) -> float:
    """Seconds the kernel has to answer kernel_info, taken now."""
    return base * load_factor()


class StartSlot:
    """One of `count` slots in `folder`, held from `acquire` until `release` (or this process's end)."""

    def __init__(self, folder: Path, count: int):
        self.folder = Path(folder)
        self.count = max(1, int(count))
        self.index: int | None = None
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        if fcntl is None:
            self.index = -1
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        for i in range(self.count):
            fd = os.open(self.folder / f"slot-{i}", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self._fd, self.index = fd, i
            return True
        return False

    def acquire(self) -> float:
        """Wait for a free slot; returns the seconds waited."""
        started = time.monotonic()
        while not self.try_acquire():
            time.sleep(SLOT_POLL)
        return time.monotonic() - started

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the lock

    @property
    def held(self) -> bool:
        return self.index is not None and (self._fd is not None or fcntl is None)


def pick_transport(requested: str, connection_file: str) -> str:
    """`ipc` where it works (POSIX, and the socket names fit in sun_path), else `tcp`."""
    if requested != "ipc" or os.name != "posix":
        return "tcp"
    ipc_prefix = os.path.splitext(connection_file)[0] + "-ipc-00"
    return "ipc" if len(os.fsencode(ipc_prefix)) <= SOCKET_PATH_LIMIT else "tcp"


def kernel_files(connection_file: str) -> list[Path]:
    """The connection file and the ipc sockets named after it (what an abrupt exit leaves behind)."""
    if not connection_file:
        return []
    cf = Path(connection_file)
    return [cf, *cf.parent.glob(glob.escape(cf.stem) + "-ipc-*")]
