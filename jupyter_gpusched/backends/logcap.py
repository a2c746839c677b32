"""A job's log on disk, capped: past `max_bytes` its head is dropped and a line at the top says so.

Whoever appends to a log.txt calls `trim_log` after writing (the runner's `LogPump`, the Kubernetes pod-log
copier). The trim keeps the last half of the cap, so it runs once per half-cap of output, and replaces the
file atomically (a reader sees the old or the new file, never half of one). Writers must open the file by
name for each write, not hold a descriptor across a trim: the runner therefore sends its own and its
kernel's output through a pipe (`LogPump`) instead of letting them write to the file.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

DEFAULT_MAX_LOG_BYTES = 256 * 1024 * 1024
_COPY = 1024 * 1024


def dropped_marker(dropped: int, cap: int) -> bytes:
    return (
        f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] this log passed its cap of {cap} bytes: "
        f"its first {dropped} bytes were dropped, what follows is its tail\n"
    ).encode()


def trim_log(path: Path, max_bytes: int) -> int:
    """If `path` is over `max_bytes`, replace it by a marker line and its last `max_bytes // 2` bytes
    (starting at a line). Returns its size afterwards. 0 or less: no cap."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError:
        return 0
    if max_bytes <= 0 or size <= max_bytes:
        return size
    tmp = path.with_name(f".{path.name}.{os.getpid()}.trim")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        src.seek(size - max_bytes // 2)
        src.readline()  # start the tail at a whole line
        dst.write(dropped_marker(src.tell(), max_bytes))
        while chunk := src.read(_COPY):
            dst.write(chunk)
    os.replace(tmp, path)
    return _size(path) or 0


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


class LogPump:
    """This process's stdout and stderr (and those of the processes it starts, the kernel) into a pipe;
    a thread appends what comes out to the log file, trimming it past `max_bytes`."""

    def __init__(self, path: Path, max_bytes: int):
        self.path, self.max_bytes = Path(path), max_bytes
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(write, 1)
        os.dup2(write, 2)
        os.close(write)
        self._read = read
        self._size = _size(self.path) or 0
        self._thread = threading.Thread(target=self._run, name="gpusched-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while data := os.read(self._read, 65536):
            try:
                with open(self.path, "ab") as f:
                    f.write(data)
                self._size += len(data)
                if 0 < self.max_bytes < self._size:
                    self._size = trim_log(self.path, self.max_bytes)
            except OSError:
                pass  # a full disk must not stop the job; what could not be written is lost

    def close(self, timeout: float = 1.0) -> None:
        """Flush what this process wrote and let the thread write it out (a child that still holds the
        pipe would keep it open: wait `timeout` seconds at most)."""
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        self._thread.join(timeout)
