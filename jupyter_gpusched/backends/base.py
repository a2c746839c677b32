"""The one protocol between the live service and the places jobs run.

The service (`service/loop.py`) calls only what is defined here: `launch` a notebook on
GPUs it chose, `poll` for news every tick, `kill` on cancel or preemption,
`reap_orphan` after a server restart. A backend owns one folder per job (`job_dir`);
the file layout of that folder is defined below so the REST API, the runner and the
backend agree on it.

Backends are traitlets Configurables (jupyter-scheduler's pattern): each owns its settings
(`c.LocalBackend.virtual_gpus`, `c.KubernetesBackend.namespace`), and the server builds the
one it is configured with as `backend_class(parent=server_app)`.

What `failed`, `lost` and `preempted` mean is the same on every backend, and so is what
`max_retries` counts (docs/scheduling.md): `failed` is the notebook's own failure (it raised,
its process exited non-zero, it ran past `max_runtime`, or the backend refused it): the job
fails at once and is never re-run. `lost` is a run that vanished without the notebook failing
(its Kubernetes Job deleted, its pod failed by the node with no container error; the service
adds the jobs whose heartbeat stopped and those a restart interrupted): the job is re-run while
`max_retries` allow, then fails. `preempted` is an announced stop (eviction, a node taken away):
the job is requeued and resumes from its checkpoint without using a retry. `not_started` is a
launch that failed before the notebook ran (its kernel could not start, died or never answered
kernel_info): like a `BackendError` from `launch`, the job goes back in line after a pause,
counted apart from `max_retries` (`launch_retries`). A backend reports `started` only once the
notebook runs (on the local backend: its kernel answered kernel_info).
"""

from __future__ import annotations

import os
import threading
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from traitlets import MetaHasTraits
from traitlets.config import LoggingConfigurable

from ..core.model import Allocation, JobSpec, JobState, NodeSpec, Pool, Tenant
from ..core.parameters import check_parameters
from ..core.scheduler import SpecError

__all__ = [
    "Backend",
    "BackendError",
    "BackendUpdate",
    "LaunchRequest",
    "UpdateKind",
    "error_path",
    "heartbeat_path",
    "kernel_pid_path",
    "kernel_ready_path",
    "launch_info_path",
    "log_path",
    "output_path",
    "params_path",
    "pid_path",
    "validate_parameters",
    "write_atomic",
]


class BackendError(RuntimeError):
    """A job could not be started (or a backend call failed). The message is one readable sentence."""


class LaunchRefused(BackendError):
    """The backend will never start this job as it stands (e.g. its notebook was swapped for a
    link after submission). Unlike other BackendErrors, which are infrastructure failures that
    the service retries, the job fails at once."""


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a backend needs to run one attempt of one job."""

    job_id: str
    notebook: Path  # absolute path of the input notebook (validated by the service to be inside the root)
    cwd: Path  # working directory of the run (the notebook's folder)
    parameters: Mapping[str, Any]  # injected papermill-style after the cell tagged "parameters"
    gpu_ids: tuple[int, ...]  # -> CUDA_VISIBLE_DEVICES="0,1"; () -> CUDA_VISIBLE_DEVICES=""
    job_dir: Path  # per-job folder the backend owns: log, executed output, pid file, heartbeat
    max_runtime: float | None  # seconds; past it the whole job is killed and reported failed
    kernel_name: str | None = None  # None: the notebook's own kernelspec, else python3
    spec: JobSpec | None = None  # the job as submitted (tenant, priority, retries ...), for cluster backends
    allocation: Allocation = ()  # where the core placed it: ((node, (gpu index, ...)), ...)
    attempt: int = 1  # 1, 2, ... ($GPUSCHED_ATTEMPT): the job's checkpoint folder is the same on each
    checkpoint_interval: float | None = None  # what the policy wants ($GPUSCHED_CHECKPOINT_INTERVAL), if any
    preempt_grace: float | None = None  # its pool's grace period (c.GPUSched.pools); None: the backend's preempt_grace
    environment: Mapping[str, str] = field(default_factory=dict)  # extra variables, e.g. GPUSCHED_INPUTS


UpdateKind = Literal[
    "started", "heartbeat", "succeeded", "failed", "not_started", "preempted", "lost", "node_added", "node_lost"
]


@dataclass(frozen=True)
class BackendUpdate:
    """One piece of news about a job, as returned by `Backend.poll`."""

    job_id: str
    kind: UpdateKind
    time: float  # wall clock (time.time()) when observed
    message: str = ""  # for failed: one readable line ("ZeroDivisionError: division by zero (cell 3)")
    progress: tuple[int, int] | None = None  # (code cells executed, code cells in total) when known
    activity: Mapping[str, Any] | None = None  # heartbeat: the runner's progress report (core.stalls.Activity)
    # preempted: the job stopped through no fault of its own (requeue it, no retry used); lost: its run
    # vanished (requeue by its retry policy). node_added / node_lost (job_id ""): capacity changed; `node`
    # is the node, `pool` its pool's terms when the backend knows them.
    node: NodeSpec | None = None
    pool: Pool | None = None
    checkpoint_at: float | None = None  # heartbeat: when the notebook last saved a checkpoint (checkpoint.py)
    # started, under another system's admission (`Backend.admission`): node -> GPUs the job's pods hold there.
    placed: Mapping[str, int] | None = None


class _ConfigurableABCMeta(MetaHasTraits, ABCMeta):
    """traitlets' metaclass and ABCMeta in one: a Backend is Configurable, and abstract."""


class Backend(LoggingConfigurable, metaclass=_ConfigurableABCMeta):
    """Where jobs run. All methods are called from the service's loop and must return quickly
    (`kill` and `close` may wait a few seconds for processes to die). Settings are config traits
    of the subclass (`c.<ClassName>.<trait>`)."""

    name: str  # "local", "kubernetes": shown in the API and logs
    # Nodes can come and go (a cluster an autoscaler sizes); False: a fixed machine, which the
    # pool-size recommendation never proposes to shrink.
    elastic: bool = True
    # Who admits jobs. "core": the service's scheduler places each job and calls `launch` with its GPUs.
    # Anything else (e.g. "kueue"): the service hands every queued job over with `launch` (no allocation)
    # at once, and the backend reports where it started (`BackendUpdate.placed`); see service/handover.py.
    admission: str = "core"

    @abstractmethod
    def inventory(self) -> list[NodeSpec]:
        """The nodes and GPU counts this backend can run jobs on."""

    @abstractmethod
    def launch(self, req: LaunchRequest) -> None:
        """Start one job and return at once. Raise BackendError if it cannot start."""

    @abstractmethod
    def kill(self, job_id: str, reason: str) -> None:
        """Stop a job and everything it started (cancel, preemption). Idempotent; no update
        is emitted afterwards for a job killed on purpose."""

    def begin_kill(self, job_id: str, reason: str) -> Callable[[], None] | None:
        """The fast half of `kill`, for callers on an event loop: forget the job now (nothing is reported
        for it afterwards) and return the slow half (signals, a grace period) to run on a worker thread,
        or None when nothing is left to wait for. The default does the whole kill here, for backends
        whose `kill` returns at once (Kubernetes: its reconciler deletes the Job)."""
        self.kill(job_id, reason)
        return None

    def begin_preempt(self, job_id: str, reason: str) -> Callable[[], None] | None:
        """`begin_kill` for a preemption: a backend that can warn the job first (a signal, then a grace period
        to save a checkpoint) does so in the slow half. The default: the same as `begin_kill`."""
        return self.begin_kill(job_id, reason)

    def pools(self) -> list[Pool]:
        """Pools this backend finds by itself (a cluster's labelled node groups), added to those configured
        in c.GPUSched.pools. The default: none."""
        return []

    @abstractmethod
    def poll(self) -> list[BackendUpdate]:
        """What happened since the last poll: starts, heartbeats, exits. Never blocks long."""

    @abstractmethod
    def running(self) -> set[str]:
        """Ids of jobs with a live process that this backend instance started."""

    @abstractmethod
    def reap_orphan(self, job_dir: Path) -> bool:
        """After a server restart: kill what a previous server left running for the job whose
        folder is `job_dir`. True if something was killed."""

    @abstractmethod
    def gpu_memory_used_mib(self) -> dict[tuple[str, int], float]:
        """(node, gpu index) -> MiB in use, for leak detection. Empty when unknown."""

    def adopt(self, jobs: Mapping[str, tuple[JobState, Allocation]]) -> set[str] | None:
        """After a restart, before anything else: `jobs` is every job in the store -> (state, allocation).
        A backend whose jobs outlive the service (Kubernetes) takes over the active ones still running and
        returns their ids: they keep their GPUs and their news (even "finished while you were away") comes
        through `poll`. None (the default): nothing outlives the service; it reaps and requeues them."""
        return None

    def job_dirs(self, dirs: Mapping[str, Path]) -> None:
        """After `adopt`: the folders of the adopted jobs (job id -> folder), for backends that write there
        (the Kubernetes backend's pod-log copy). The default ignores them."""
        return None

    def queue_status(self, job_id: str) -> tuple[int | None, str] | None:
        """Under another system's admission: a queued job's place in that system's line (0 = next; None when
        unknown) and why it waits. None (the default): the backend knows nothing of it."""
        return None

    def tenants(self) -> list[Tenant] | None:
        """Under another system's admission: the tenants' terms as that system holds them (quota, burst), which
        replace the configured ones. None (the default): the configured ones stand."""
        return None

    def check(self, spec: JobSpec, notebook: Path, parameters: Mapping[str, Any] | None = None) -> None:
        """Raise BackendError if this backend would refuse the job (called at submit, so the user gets
        the reason at once). The default accepts everything."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Kill everything this backend still runs. (A server shutdown does not call this:
        runners outlive the server and are reaped on the next start.)"""


# --- the job folder -------------------------------------------------------------------------
# job_dir/
#   log.txt          runner and kernel output, appended, readable while the job runs
#   output.ipynb     the executed notebook (written as cells finish, also on failure)
#   params.json      the parameters to inject (never put on a command line)
#   pid              the runner's pid (= its process group id), one integer
#   launch.json      {"job_id", "pid", "token", "time", ...}: identifies the runner's processes
#   kernel_pid       the kernel's pid (= its process group id), written by the runner
#   kernel_ready     when the kernel answered kernel_info (the run has started), written by the runner
#   heartbeat        {"time", "cells_done", "cells_total", ...}, rewritten by the runner
#   error.txt        one line: why the run failed


def log_path(job_dir: Path) -> Path:
    return Path(job_dir) / "log.txt"


def output_path(job_dir: Path) -> Path:
    return Path(job_dir) / "output.ipynb"


def params_path(job_dir: Path) -> Path:
    return Path(job_dir) / "params.json"


def pid_path(job_dir: Path) -> Path:
    return Path(job_dir) / "pid"


def launch_info_path(job_dir: Path) -> Path:
    return Path(job_dir) / "launch.json"


def kernel_pid_path(job_dir: Path) -> Path:
    return Path(job_dir) / "kernel_pid"


def kernel_ready_path(job_dir: Path) -> Path:
    return Path(job_dir) / "kernel_ready"


def heartbeat_path(job_dir: Path) -> Path:
    return Path(job_dir) / "heartbeat"


def error_path(job_dir: Path) -> Path:
    return Path(job_dir) / "error.txt"


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` so a reader never sees a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def validate_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Check that `parameters` can be injected into a notebook safely and return them as a
    plain JSON-compatible dict (tuples become lists). The rule is the core's, the same the
    REST API applies at submit (`core/parameters.py`). Raises ValueError."""
    try:
        return check_parameters(parameters)
    except SpecError as exc:
        raise ValueError(exc.message) from None
