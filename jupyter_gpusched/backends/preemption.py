"""Graceful preemption and the checkpoint folder, for the local backend.

Every job gets a checkpoint folder that survives its attempts (`job_dir/checkpoints`: the job folder is keyed by
job id), named to the notebook as `$GPUSCHED_CHECKPOINT_DIR`, with `$GPUSCHED_ATTEMPT` and, when the policy wants
one (spot pools), `$GPUSCHED_CHECKPOINT_INTERVAL` (`jupyter_gpusched.checkpoint` reads them).

Before a preempted job is killed, its kernel's process group gets `preempt_signal` (SIGTERM) and up to
`preempt_grace` seconds (its pool's, when c.GPUSched.pools sets one) to end (as Slurm's --signal); the checkpoint
helper turns the signal into a last save, so a job that saved in the grace period loses nothing. Then the usual kill. All of it on the kill thread, never on the
event loop (`begin_preempt` returns the slow half, like `begin_kill`).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traitlets import Float, Unicode, validate
from traitlets.config import LoggingConfigurable

from ..checkpoint import ATTEMPT_ENV, DIR_ENV, INTERVAL_ENV, SIGNAL_ENV
from .base import LaunchRequest
from .processes import warn_group

CHECKPOINTS = "checkpoints"


def checkpoint_dir(job_dir: Path) -> Path:
    return Path(job_dir) / CHECKPOINTS


def checkpoint_env(req: LaunchRequest, preempt_signal: str) -> dict[str, str]:
    """The variables a job's notebook finds its checkpoint folder, attempt and interval in."""
    env = {DIR_ENV: str(checkpoint_dir(req.job_dir)), ATTEMPT_ENV: str(max(1, req.attempt)), SIGNAL_ENV: preempt_signal}
    if req.checkpoint_interval is not None and req.checkpoint_interval > 0:
        env[INTERVAL_ENV] = repr(float(req.checkpoint_interval))
    return env


def grace_for(pool_grace: float | None, default: float) -> float:
    """The grace period of one job: its pool's (`c.GPUSched.pools[name]["preempt_grace"]`, handed to the backend
    as `LaunchRequest.preempt_grace`) when the pool sets one, else the backend's `preempt_grace`."""
    return default if pool_grace is None else float(pool_grace)


def reported_checkpoint(heartbeat: Path) -> float | None:
    """When the notebook last saved a checkpoint, as its runner's heartbeat file says."""
    try:
        value = json.loads(Path(heartbeat).read_text(encoding="utf-8")).get("checkpoint_at")
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class GracefulPreemption(LoggingConfigurable):
    """The settings and the warning half of a preemption; mixed into LocalBackend (which has `_runs`, `_lock`
    and `begin_kill`)."""

    preempt_signal = Unicode(
        "SIGTERM",
        config=True,
        help="Signal sent to a preempted job's kernel (its process group) before it is killed, so it can save "
        "a checkpoint (jupyter_gpusched.checkpoint does on this signal).",
    )
    preempt_grace = Float(
        30.0,
        config=True,
        help="Seconds a preempted job has, after preempt_signal, to save and exit before it is killed. Its GPUs "
        "stay taken meanwhile. 0: killed at once.",
    )

    _runs: dict[str, Any]
    _lock: Any
    begin_kill: Callable[[str, str], Callable[[], None] | None]

    @validate("preempt_signal")
    def _check_signal(self, proposal: dict[str, Any]) -> str:
        return preempt_signum(proposal["value"]).name

    @validate("preempt_grace")
    def _check_grace(self, proposal: dict[str, Any]) -> float:
        if not proposal["value"] >= 0:
            raise ValueError("preempt_grace must be >= 0")
        return float(proposal["value"])

    def begin_preempt(self, job_id: str, reason: str) -> Callable[[], None] | None:
        """`begin_kill`, with the warning first: the signal to the kernel's group and its grace period."""
        with self._lock:
            run = self._runs.get(job_id)
        kernel = run.kernel_pid() if run is not None and run.stopping is None else None
        finish = self.begin_kill(job_id, reason)
        grace = grace_for(run.req.preempt_grace if run is not None else None, self.preempt_grace)
        if kernel is None or finish is None or grace <= 0:
            return finish
        signum, token = preempt_signum(self.preempt_signal), run.token if run else None

        def warn_then_kill() -> None:
            warn_group(kernel, signum, grace, token=token)
            finish()

        return warn_then_kill


def preempt_signum(name: str) -> signal.Signals:
    """ "SIGTERM", "term", "15" -> signal.SIGTERM; ValueError for anything else."""
    text = str(name).strip().upper()
    try:
        return (
            signal.Signals(int(text))
            if text.isdigit()
            else signal.Signals[text if text.startswith("SIG") else "SIG" + text]
        )
    except (KeyError, ValueError):
        raise ValueError(f"not a signal: {name!r}") from None
