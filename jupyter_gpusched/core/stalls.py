"""Stalled and input-bound jobs: is a running job still doing anything? Pure functions.

A runner's heartbeat only proves the runner is alive. Progress is something the notebook
does: a cell finishes or starts, the notebook prints or displays something, the kernel
changes state, the job's GPUs are busy or their memory changes, or its processes burn
CPU or move bytes to or from storage. Each report is compared with the last report that
showed progress (the mark), so CPU and I/O rates are averaged over the whole quiet spell:
a kernel that sits on a lock uses almost no CPU, a CPU loop uses a whole core. On a machine
so loaded that a busy loop gets little CPU, the runner's `runnable` count still shows it
(a thread running or waiting for a CPU in two looks in a row), which a waiting thread never is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Activity:
    """One report of what a running job is doing; None where the source cannot tell."""

    time: float  # when it was sampled (epoch seconds)
    cells_done: int | None = None
    cell_index: int | None = None  # the cell running now; None between cells
    cell_started: float | None = None  # when that cell began
    execution_state: str | None = None  # the kernel's last status: starting, busy, idle
    last_output: float | None = None  # when the notebook last printed or displayed anything
    cpu_seconds: float | None = None  # CPU time used so far by the job's processes (the runner's own left out)
    io_bytes: float | None = None  # bytes they have read from and written to storage so far
    runnable: int | None = None  # their threads running or waiting for a CPU, in two looks in a row
    gpu_util: float | None = None  # mean utilisation of the job's GPUs now, percent
    gpu_memory_mib: float | None = None  # memory in use on them, summed

    @classmethod
    def from_report(cls, data: Mapping[str, Any] | None) -> Activity | None:
        """From a heartbeat's `activity` object; fields of the wrong type are dropped (the runner
        is the notebook's process, so nothing it writes is trusted)."""
        if not isinstance(data, Mapping) or not _number(data.get("time")):
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            v = data.get(f.name)
            if f.name == "execution_state":
                values[f.name] = v[:16] if isinstance(v, str) else None
            elif f.name in ("cells_done", "cell_index", "runnable"):
                values[f.name] = v if isinstance(v, int) and not isinstance(v, bool) else None
            else:
                values[f.name] = float(v) if isinstance(v, (int, float)) and _number(v) else None
        return cls(**values)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True, slots=True)
class StallRules:
    cpu_busy: float = 0.25  # cores, on average since the mark: the job computes on CPU
    io_busy_bytes_s: float = 1 * MIB  # storage bytes a second since the mark: the job reads or writes data
    gpu_busy: float = 10.0  # percent: a GPU this busy is computing
    gpu_memory_step_mib: float = 64.0  # GPU memory moving by this much is progress
    input_bound_gpu: float = 30.0  # percent: below it, with the processes busy on CPU or I/O, the job waits on data


def _rate(a: float | None, b: float | None, seconds: float) -> float | None:
    if a is None or b is None or seconds <= 0:
        return None
    return max(0.0, b - a) / seconds


def progress(mark: Activity | None, now: Activity, rules: StallRules) -> str:
    """Why `now` shows progress since `mark` (a short phrase), or "" when nothing moved."""
    if mark is None:
        return "first report"
    if now.cells_done != mark.cells_done or now.cell_index != mark.cell_index:
        return "cells ran"
    if now.last_output is not None and (mark.last_output is None or now.last_output > mark.last_output):
        return "output"
    if now.execution_state != mark.execution_state:
        return f"kernel {now.execution_state or 'gone'}"
    if now.gpu_util is not None and now.gpu_util >= rules.gpu_busy:
        return "GPU busy"
    if (
        now.gpu_memory_mib is not None
        and mark.gpu_memory_mib is not None
        and abs(now.gpu_memory_mib - mark.gpu_memory_mib) >= rules.gpu_memory_step_mib
    ):
        return "GPU memory"
    elapsed = now.time - mark.time
    cpu = _rate(mark.cpu_seconds, now.cpu_seconds, elapsed)
    if (cpu is not None and cpu >= rules.cpu_busy) or (now.runnable or 0) > 0:
        return "CPU busy"
    io = _rate(mark.io_bytes, now.io_bytes, elapsed)
    if io is not None and io >= rules.io_busy_bytes_s:
        return "I/O"
    return ""


def stalled(progress_at: float, now: float, timeout: float) -> bool:
    """No progress for `timeout` seconds (0 or less: never)."""
    return timeout > 0 and now - progress_at >= timeout


def input_bound(before: Activity, now: Activity, rules: StallRules) -> dict[str, float] | None:
    """The figures when, between two reports, the job's GPUs were nearly idle while its processes
    were busy on CPU or storage I/O ("waiting on data"); None otherwise or when unknown."""
    if now.gpu_util is None or now.gpu_util >= rules.input_bound_gpu:
        return None
    elapsed = now.time - before.time
    cpu = _rate(before.cpu_seconds, now.cpu_seconds, elapsed)
    io = _rate(before.io_bytes, now.io_bytes, elapsed)
    if (cpu is None or cpu < rules.cpu_busy) and (io is None or io < rules.io_busy_bytes_s):
        return None
    return {
        "gpu_util": round(now.gpu_util, 1),
        "cpu_cores": round(cpu or 0.0, 2),
        "io_mib_s": round((io or 0.0) / MIB, 2),
    }


def gpu_idle(now: Activity, rules: StallRules) -> bool | None:
    """Are the job's GPUs idle (below `gpu_busy`)? None when their utilisation is unknown."""
    return None if now.gpu_util is None else now.gpu_util < rules.gpu_busy
