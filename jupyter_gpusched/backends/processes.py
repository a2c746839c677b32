"""Process groups and launch tokens: find and stop every process of a job, and never a stranger.

A job's runner and its kernel each lead a process group; on Linux every process of a job also carries a
per-launch token in its environment (`GPUSCHED_LAUNCH_TOKEN`), so a sweep of /proc catches anything that left
both groups and proves a pid still belongs to the job before it is signalled (a recycled pid is never hit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

TOKEN_ENV = "GPUSCHED_LAUNCH_TOKEN"
HAVE_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, process group) of `pid` from /proc, or None if it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # after "pid (comm) "
    try:
        return fields[0].decode(), int(fields[2])
    except (IndexError, ValueError):
        return None


def _proc_pids() -> list[int]:
    try:
        return [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []


def pid_alive(pid: int | None) -> bool:
    """True if `pid` is a running process (a zombie counts as dead)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if HAVE_PROC:
        st = _proc_stat(pid)
        return st is not None and st[0] not in ("Z", "X")
    return True


def group_alive(pgid: int | None) -> bool:
    """True if the process group `pgid` has a running (non-zombie) member."""
    if not pgid or pgid <= 1:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not HAVE_PROC:
        return True
    for pid in _proc_pids():
        st = _proc_stat(pid)
        if st is not None and st[1] == pgid and st[0] not in ("Z", "X"):
            return True
    return False


def environ_has(pid: int, entry: bytes) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return entry in env.split(b"\0")


def token_pids(token: str | None) -> list[int]:
    """Live processes (other than this one) whose environment carries the launch `token`.
    Linux only; elsewhere an empty list."""
    if not HAVE_PROC or not token:
        return []
    entry = f"{TOKEN_ENV}={token}".encode()
    me = os.getpid()
    out = []
    for pid in _proc_pids():
        if pid != me and environ_has(pid, entry):
            st = _proc_stat(pid)
            if st is not None and st[0] not in ("Z", "X"):
                out.append(pid)
    return out


def _send(pid: int, sig: int, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def any_alive(groups: Iterable[int | None], *, tokens: Iterable[str | None] = ()) -> bool:
    """Is any of the process groups `groups`, or any process carrying one of the launch `tokens`, alive?
    (The cheap check `terminate` starts with, for callers that must not wait out a grace period.)"""
    if any(group_alive(g) for g in groups if g and g > 1 and g != os.getpgrp()):
        return True
    return any(token_pids(t) for t in tokens if t)


def terminate(
    groups: Iterable[int | None],
    *,
    tokens: Iterable[str | None] = (),
    grace: float = 3.0,
    children: Iterable[subprocess.Popen] = (),
) -> bool:
    """Stop process groups `groups` and every process carrying one of the launch `tokens`:
    SIGTERM, wait up to `grace` seconds, then SIGKILL whatever is left. `children` are
    Popen objects to reap on the way. Returns True if anything was alive to be signalled.
    Blocks for up to `grace` + 5 seconds: call it from a worker thread, not an event loop."""
    pgids = sorted({g for g in groups if g and g > 1 and g != os.getpgrp()})
    toks = [t for t in tokens if t]
    kids = list(children)

    def left() -> tuple[list[int], list[int]]:
        for k in kids:
            k.poll()
        strays = sorted({p for t in toks for p in token_pids(t)})
        return [g for g in pgids if group_alive(g)], strays

    live_groups, strays = left()
    if not live_groups and not strays:
        return False
    for g in live_groups:
        _send(g, signal.SIGTERM, group=True)
    for p in strays:
        _send(p, signal.SIGTERM, group=False)
    deadline = time.monotonic() + max(grace, 0.0)
    while True:
        live_groups, strays = left()
        if not live_groups and not strays:
            break
        if time.monotonic() >= deadline:
            for g in live_groups:
                _send(g, signal.SIGKILL, group=True)
            for p in strays:
                _send(p, signal.SIGKILL, group=False)
            kill_deadline = time.monotonic() + 5.0
            while any(left()) and time.monotonic() < kill_deadline:
                time.sleep(0.02)
            break
        time.sleep(0.05)
    for k in kids:
        try:
            k.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    return True


def cmdline(pid: int) -> str:
    if HAVE_PROC:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""
    try:
        return subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def is_group_leader(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def warn_group(pgid: int | None, sig: int, grace: float, *, token: str | None = None) -> bool:
    """Send `sig` to the process group `pgid` (when it still carries the launch `token`, on Linux) and wait up
    to `grace` seconds for it to end: Slurm's --signal, the warning before a kill. True if it ended in time
    (or was gone). Blocks: call it from a worker thread."""
    if not pgid or pgid <= 1 or pgid == os.getpgrp() or not group_alive(pgid):
        return True
    if HAVE_PROC and token and not environ_has(pgid, f"{TOKEN_ENV}={token}".encode()):
        return True  # not the job's any more (a recycled pid): never signal a stranger
    _send(pgid, sig, group=True)
    deadline = time.monotonic() + max(grace, 0.0)
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
