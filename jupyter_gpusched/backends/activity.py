"""What a job's processes and GPUs are doing, sampled by the runner for its heartbeat.

CPU time and storage I/O come from /proc (Linux; elsewhere None): the sum over every live
process of the job (those carrying its launch token, the runner too: starting a kernel is
work), plus the CPU time of the children they have already reaped, so a finished data-loader
worker still counts. The caller subtracts what its own sampling costs (`cpu_offset`).
GPU utilisation and memory come from NVML (`pynvml`, nvidia-ml-py) for the GPUs in
CUDA_VISIBLE_DEVICES; without NVML or without GPUs they are None. Every read is best effort:
a heartbeat never fails because a figure could not be had.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from .processes import HAVE_PROC, TOKEN_ENV, token_pids

RUNNABLE_GAP = 0.05  # seconds between the two looks at the threads' states

try:
    CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
except (AttributeError, ValueError, OSError):  # not POSIX
    CLOCK_TICKS = 100


def _cpu_seconds(pid: int) -> float | None:
    """utime + stime + cutime + cstime of `pid`, in seconds."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
        tail = data[data.rfind(b")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is tail[0]
        return sum(int(tail[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS
    except (OSError, IndexError, ValueError):
        return None


def _io_bytes(pid: int) -> float | None:
    """Bytes `pid` has made the storage layer read and write (read_bytes + write_bytes)."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:  # no task I/O accounting, or not ours
        return None
    values = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    try:
        return float(int(values["read_bytes"]) + int(values["write_bytes"]))
    except (KeyError, ValueError):
        return None


def _runnable_threads(pids: list[int], skip: int) -> set[int]:
    """Thread ids of `pids` on a CPU or waiting for one (state R), leaving out thread `skip`."""
    out = set()
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            if tid.isdigit() and int(tid) != skip:
                try:
                    data = Path(f"/proc/{pid}/task/{tid}/stat").read_bytes()
                except OSError:
                    continue
                if data[data.rfind(b")") + 2 :][:1] == b"R":
                    out.add(int(tid))
    return out


def process_figures(
    extra_pids: tuple[int, ...] = (), cpu_offset: float = 0.0, look: bool = True
) -> dict[str, float | None]:
    """{"cpu_seconds", "io_bytes", "runnable"} of this process, the job's others (by its launch token) and
    `extra_pids`; `cpu_offset` seconds are taken off the CPU time. `runnable`: threads found running or
    waiting for a CPU in two looks RUNNABLE_GAP apart (the caller's own thread left out): a busy loop
    always is, however loaded the machine; a thread waiting on a lock, a socket or a disk never is.
    `look=False`: no looks (None), for a caller that must not pause."""
    if not HAVE_PROC:
        return {"cpu_seconds": None, "io_bytes": None, "runnable": None}
    pids = sorted(set(token_pids(os.environ.get(TOKEN_ENV))) | {os.getpid()} | {p for p in extra_pids if p})
    me = threading.get_native_id()
    first = _runnable_threads(pids, me) if look else set()
    if first:
        time.sleep(RUNNABLE_GAP)
    runnable = (len(first & _runnable_threads(pids, me)) if first else 0) if look else None
    cpu = [c for c in map(_cpu_seconds, pids) if c is not None]
    io = [b for b in map(_io_bytes, pids) if b is not None]
    return {
        "cpu_seconds": max(0.0, sum(cpu) - cpu_offset) if cpu else None,
        "io_bytes": sum(io) if io else None,
        "runnable": runnable,
    }


class GpuSampler:
    """Utilisation and memory of the GPUs in CUDA_VISIBLE_DEVICES through NVML; inert without it."""

    def __init__(self, visible: str | None = None):
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "") if visible is None else visible
        self._nvml: Any = None
        self._handles: list[Any] = []
        indices = [v.strip() for v in visible.split(",") if v.strip()]
        if not indices:
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            for index in indices:  # an index, or a GPU-/MIG- UUID
                if index.isdigit():
                    self._handles.append(pynvml.nvmlDeviceGetHandleByIndex(int(index)))
                else:
                    self._handles.append(pynvml.nvmlDeviceGetHandleByUUID(index))
            self._nvml = pynvml
        except Exception:  # no driver, no such GPU, a MIG UUID NVML does not know: no GPU figures
            self._handles = []

    def sample(self) -> dict[str, float | None]:
        """{"gpu_util": mean percent, "gpu_memory_mib": summed} now, or None figures."""
        nvml = self._nvml
        if nvml is None or not self._handles:
            return {"gpu_util": None, "gpu_memory_mib": None}
        try:
            util = [nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
            mem = [memory_used_bytes(nvml, h) for h in self._handles]
        except Exception:
            return {"gpu_util": None, "gpu_memory_mib": None}
        return {"gpu_util": sum(util) / len(util), "gpu_memory_mib": sum(mem) / (1024 * 1024)}

    def close(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:
                pass
            self._nvml = None


def memory_used_bytes(nvml: Any, handle: Any) -> int:
    """Memory processes use on a GPU. NVML's v2 query leaves out what the driver reserves for itself (615 MiB
    on an idle H200, which the v1 query counts as used: an idle GPU would look leaky); v1 where v2 is missing."""
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(handle, version=nvml.nvmlMemory_v2).used)
    except Exception:  # an older driver or nvidia-ml-py without the v2 call
        return int(nvml.nvmlDeviceGetMemoryInfo(handle).used)
