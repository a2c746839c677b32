"""Checkpoints for notebooks that jupyter-gpusched runs: save, resume on the next attempt, survive preemption.

    from jupyter_gpusched import checkpoint

    state = checkpoint.load() or {"step": 0, "weights": init()}  # None on a first attempt
    checkpoint.on_preempt(lambda: state)  # the preemption signal saves this, then the kernel exits
    due = checkpoint.every()  # $GPUSCHED_CHECKPOINT_INTERVAL when the scheduler sets one, else 300 s
    while state["step"] < steps:
        train(state)
        if due:
            checkpoint.save(state)

Standard library only (it runs in the job's kernel). The folder is `$GPUSCHED_CHECKPOINT_DIR`, which the
scheduler sets per job (not per attempt), so a preempted or requeued job finds what its last attempt saved;
outside the scheduler it is `./gpusched-checkpoints`. `save` writes atomically (a temp file, then a rename; then
`latest.json`, also by rename), pickles an object or copies a file or folder given as a path, and keeps the last
`keep` checkpoints. `latest.json` (`{"time", "file", "kind", "attempt"}`) is what the scheduler reads: the local
runner puts its time in its heartbeat, so the job's `last_checkpoint_at` is live; with
`GPUSCHED_CHECKPOINT_REPORT=log` (Kubernetes) each save also prints one `gpusched-checkpoint {...}` line.

Preemption: before killing a preempted job the scheduler sends its kernel `$GPUSCHED_PREEMPT_SIGNAL` (SIGTERM)
and waits a grace period. On import this module installs a handler for that signal: it saves what the callable
given to `on_preempt` returns (nothing if none was given), then lets the signal end the kernel as it would have.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DIR_ENV = "GPUSCHED_CHECKPOINT_DIR"
ATTEMPT_ENV = "GPUSCHED_ATTEMPT"
INTERVAL_ENV = "GPUSCHED_CHECKPOINT_INTERVAL"
SIGNAL_ENV = "GPUSCHED_PREEMPT_SIGNAL"
REPORT_ENV = "GPUSCHED_CHECKPOINT_REPORT"
MANIFEST = "latest.json"
LOG_PREFIX = "gpusched-checkpoint "
DEFAULT_INTERVAL = 300.0  # seconds, when neither every() nor the scheduler names one
KEEP = 2

__all__ = ["attempt", "directory", "every", "interval", "last_saved", "load", "on_preempt", "save"]

_last_save: float | None = None  # time.monotonic() of this process's last save
_preempt_state: Callable[[], Any] | None = None


def directory() -> Path:
    """Where this job's checkpoints live (the same folder on every attempt)."""
    return Path(os.environ.get(DIR_ENV) or "gpusched-checkpoints")


def attempt() -> int:
    """Which attempt of the job this is: 1, then 2 after a preemption or requeue."""
    try:
        return max(1, int(os.environ.get(ATTEMPT_ENV, "1")))
    except ValueError:
        return 1


def interval() -> float | None:
    """The checkpoint interval the scheduler asks for (spot pools), in seconds, or None."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("file"), str) else None


def last_saved(folder: Path | str | None = None) -> float | None:
    """Wall-clock time of the last checkpoint in `folder` (default: this job's), or None."""
    data = _manifest(Path(folder) if folder is not None else directory())
    t = data.get("time") if data else None
    return float(t) if isinstance(t, (int, float)) else None


def _replace_atomically(tmp: Path, final: Path) -> None:
    if tmp.is_file():
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
    os.replace(tmp, final)


def save(obj_or_path: Any, *, keep: int = KEEP) -> Path:
    """Save a checkpoint and return its path: an existing file or folder given as a path (str or Path) is
    copied, anything else is pickled. Atomic: a reader (or the next attempt) sees the previous checkpoint
    or this one, never half of one. Keeps the last `keep` checkpoints."""
    global _last_save
    folder = directory()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = f"ckpt-{time.time_ns():020d}-{os.getpid()}-{threading.get_ident()}"
    is_path = isinstance(obj_or_path, (str, os.PathLike)) and Path(obj_or_path).exists()
    if is_path:
        source = Path(obj_or_path)
        name, kind = stamp + (source.suffix if source.is_file() else ""), "path"
        tmp = folder / f".{name}.tmp"
        if source.is_dir():
            shutil.copytree(source, tmp)
        else:
            shutil.copy2(source, tmp)
    else:
        name, kind = stamp + ".pkl", "pickle"
        tmp = folder / f".{name}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(obj_or_path, f, protocol=pickle.HIGHEST_PROTOCOL)
    _replace_atomically(tmp, folder / name)
    now = time.time()
    record = {"time": now, "file": name, "kind": kind, "attempt": attempt()}
    manifest_tmp = folder / f".{MANIFEST}.{stamp}.tmp"
    manifest_tmp.write_text(json.dumps(record), encoding="utf-8")
    _replace_atomically(manifest_tmp, folder / MANIFEST)
    _last_save = time.monotonic()
    _prune(folder, max(1, keep), name)
    if os.environ.get(REPORT_ENV) == "log":  # where the scheduler reads the pod log (Kubernetes)
        print(LOG_PREFIX + json.dumps(record), flush=True)
    return folder / name


def _prune(folder: Path, keep: int, current: str) -> None:
    saved = sorted(p for p in folder.glob("ckpt-*") if not p.name.startswith("."))
    for old in saved[:-keep]:
        if old.name == current:
            continue
        if old.is_dir():
            shutil.rmtree(old, ignore_errors=True)
        else:
            old.unlink(missing_ok=True)


def load(default: Any = None) -> Any:
    """The last checkpoint saved by this job (any attempt): the object for a pickle, the copy's Path for a
    path. `default` (None) when there is none yet, as on a first attempt."""
    folder = directory()
    data = _manifest(folder)
    if data is None or not (folder / data["file"]).exists():
        return default
    path = folder / data["file"]
    if data.get("kind") == "path":
        return path
    with open(path, "rb") as f:
        return pickle.load(f)


class every:
    """A guard for a training loop, true once `seconds` have passed since the last save (or since it was
    made): `if due: checkpoint.save(state)`. `seconds=None` follows $GPUSCHED_CHECKPOINT_INTERVAL (what the
    scheduler wants, e.g. on spot pools), else 300 s."""

    def __init__(self, seconds: float | None = None):
        self.seconds = float(seconds) if seconds is not None else (interval() or DEFAULT_INTERVAL)
        self._since = time.monotonic()

    def __bool__(self) -> bool:
        since = max(self._since, _last_save or self._since)
        return time.monotonic() - since >= self.seconds

    __call__ = __bool__

    def __repr__(self) -> str:
        return f"checkpoint.every({self.seconds:g})"


def on_preempt(state: Callable[[], Any] | None) -> None:
    """On the preemption signal, save `state()` before the kernel exits (None: save nothing)."""
    global _preempt_state
    _preempt_state = state
    _install()


def _preempt_signal() -> signal.Signals:
    name = os.environ.get(SIGNAL_ENV, "SIGTERM").upper()
    try:
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except KeyError:
        return signal.SIGTERM


_previous: Any = None
_installed: signal.Signals | None = None


def _on_signal(signum: int, frame: Any) -> None:
    state = _preempt_state
    if state is not None:
        try:
            save(state())
        except Exception as exc:  # the kernel is going away anyway: say why nothing was saved
            print(f"gpusched: checkpoint on preemption failed: {exc!r}", flush=True)
    # Then the signal does what it did before us: a handler of its own, or (the default) end the process.
    previous = _previous
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install() -> None:
    global _previous, _installed
    sig = _preempt_signal()
    if _installed == sig or threading.current_thread() is not threading.main_thread():
        return  # signal handlers belong to the main thread
    _previous = signal.signal(sig, _on_signal)
    _installed = sig


if os.environ.get(DIR_ENV):  # inside a scheduled job: be ready for a preemption from the first cell
    _install()
