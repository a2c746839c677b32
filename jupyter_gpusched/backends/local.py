"""The embedded default backend: run notebooks as processes on this machine.

Each job is one runner process (`python -m jupyter_gpusched.backends.runner`) started in
its own session, so it is its own process group and outlives a restart of the Jupyter
server. The runner executes the notebook with papermill; the kernel it starts is in yet
another session (jupyter_client always does that), so stopping a job means stopping two
process groups: the runner's (pid in `job_dir/pid`) and the kernel's (pid in
`job_dir/kernel_pid`). On Linux every process of a job also carries a per-launch token in
its environment (`GPUSCHED_LAUNCH_TOKEN`); a sweep of /proc for that token catches anything
that left both groups (a `setsid` child of the notebook) and proves a pid still belongs to
the job before it is killed, so a recycled pid is never hit.

Kernels: a burst of runners would start their kernels all at once and starve each other past any
timeout, so a runner takes one of `max_concurrent_starts` start slots until its kernel answered
kernel_info, under a deadline that grows with the machine's load, and talks to it over ipc
sockets, which have no ports to race for (kernelstart.py). The job is reported started once its
kernel answered; a kernel that never did is reported `not_started` (the service retries it).

GPUs: with NVML (`pynvml`, from nvidia-ml-py) the node has the real GPU count; without it,
`virtual_gpus` virtual GPUs, so everything works on a laptop. A job's GPU indices become
CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID so they match NVML's numbering).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from traitlets import CaselessStrEnum, Float, Int, Unicode, default, validate

from ..core.model import NodeSpec, Pool
from .activity import memory_used_bytes
from .base import (
    Backend,
    BackendError,
    BackendUpdate,
    LaunchRequest,
    error_path,
    heartbeat_path,
    kernel_pid_path,
    kernel_ready_path,
    launch_info_path,
    log_path,
    output_path,
    params_path,
    pid_path,
    validate_parameters,
    write_atomic,
)
from .exitrecord import exit_record_path, read_exit_record
from .kernelstart import default_max_starts
from .logcap import DEFAULT_MAX_LOG_BYTES
from .preemption import GracefulPreemption, checkpoint_env, reported_checkpoint
from .processes import (
    HAVE_PROC,
    TOKEN_ENV,
    any_alive,
    cmdline,
    environ_has,
    is_group_leader,
    pid_alive,
    terminate,
    token_pids,
)

log = logging.getLogger(__name__)

RUNNER_MODULE = "jupyter_gpusched.backends.runner"


# --- small file helpers -----------------------------------------------------------------------
def _read_int(path: Path) -> int | None:
    try:
        value = int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return value if value > 0 else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _read_float(path: Path) -> float | None:
    try:
        return float(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _first_line(path: Path, limit: int = 500) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    line = " ".join(text.strip().splitlines()[0].split()) if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _last_log_line(job_dir: Path, limit: int = 300) -> str:
    try:
        with open(log_path(job_dir), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _exit_message(rc: int, job_dir: Path) -> str:
    """For a runner that died without writing error.txt: "exit code -9", or for a runner that
    could not even start, "exit code 1: <the last line it printed>"."""
    last = _last_log_line(job_dir) if rc > 0 else ""
    return f"exit code {rc}: {last}" if last else f"exit code {rc}"


def _append_log(job_dir: Path, line: str) -> None:
    try:
        with open(log_path(job_dir), "a", encoding="utf-8") as f:
            f.write(f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] {line}\n")
    except OSError:
        pass


def format_seconds(seconds: float) -> str:
    """60.0 -> "60", 2.5 -> "2.5"."""
    seconds = float(seconds)
    return str(int(seconds)) if seconds.is_integer() else f"{seconds:.1f}"


def max_runtime_message(seconds: float) -> str:
    return f"max_runtime exceeded ({format_seconds(seconds)} s)"


@dataclass
class _Run:
    req: LaunchRequest
    proc: subprocess.Popen
    token: str
    started_at: float  # wall clock at spawn
    deadline: float | None  # time.monotonic() past which the job is killed
    reported_started: bool = False
    last_beat: float | None = None
    # Set when the backend itself stops the run (max_runtime, what an exited runner left): the
    # processes die on a kill thread and `final` is reported once they are gone, so the job
    # keeps its GPUs until then.
    stopping: Future | None = None
    final: BackendUpdate | None = None

    def kernel_pid(self) -> int | None:
        return _read_int(kernel_pid_path(self.req.job_dir))


class LocalBackend(GracefulPreemption, Backend):
    """Runs each job as a papermill runner process on this machine."""

    name = "local"
    elastic = False  # this machine: it can be outgrown, not shrunk
    # Class constants rather than settings (tests and subclasses read them from the class):
    kill_grace: float = 3.0  # seconds between SIGTERM and SIGKILL
    runner_max_runtime_slack: float = 10.0  # the runner kills itself this long past max_runtime
    # (a safety net for when no server is polling; the backend normally acts first)

    node_name = Unicode("local", config=True, help="Name of this machine as a node of the cluster.")
    virtual_gpus = Int(
        4, config=True, help="GPUs offered when no NVIDIA GPU is found (NVML), so everything works on a laptop."
    )
    gpu_type = Unicode(
        "",
        config=True,
        help="Type of this machine's GPUs: a job's gpu_type must name it. Empty: the product name NVML reports "
        "(e.g. 'NVIDIA H200') when all GPUs agree, 'virtual' for virtual GPUs.",
    )
    python = Unicode(sys.executable, config=True, help="Python that runs the runner (needs papermill).")
    heartbeat_interval = Float(5.0, config=True, help="Seconds between a running job's heartbeats.")
    max_log_bytes = Int(
        DEFAULT_MAX_LOG_BYTES,
        config=True,
        help="Cap of a job's log.txt in bytes: past it the head is dropped (the last half of the cap is kept, "
        "under a line that says so). 0: no cap.",
    )

    max_concurrent_starts = Int(
        config=True,
        help="Kernels brought up at once (each runner holds a start slot until its kernel answered kernel_info). "
        "Default: the CPU count, at least 2.",
    )
    kernel_start_timeout = Float(
        60.0,
        config=True,
        help="Seconds a kernel has to answer kernel_info once its start slot is taken, multiplied by the machine's "
        "load per CPU (from 1 to 4). Past it the launch failed: the job goes back in line (c.GPUSched.launch_retries).",
    )
    kernel_transport = CaselessStrEnum(
        ["ipc", "tcp"],
        "ipc",
        config=True,
        help="How runners talk to their kernels: ipc (Unix sockets: no ports to race for when many kernels start "
        "together; tcp where ipc does not work) or tcp.",
    )
    start_slots_dir = Unicode(
        "",
        config=True,
        help="Folder of the start slots (lock files) shared by this server's runners. Default: '.start-slots' "
        "beside the job folders. Servers that should share one bound on this machine may name the same folder.",
    )

    cpus = Float(
        config=True,
        help="CPUs of this machine that jobs' `cpus` are held to (a job that would overload it waits). "
        "Default: the CPU count; 0: not counted.",
    )
    memory = Int(
        config=True,
        help="MiB of memory of this machine that jobs' `memory` is held to (a job that would overload it waits). "
        "Default: the physical memory; 0: not counted.",
    )

    @default("cpus")
    def _default_cpus(self) -> float:
        return float(os.cpu_count() or 0)

    @default("memory")
    def _default_memory(self) -> int:
        try:
            return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20)
        except (AttributeError, ValueError, OSError):  # not POSIX: not counted
            return 0

    @default("max_concurrent_starts")
    def _default_max_starts(self) -> int:
        return default_max_starts()

    @validate("max_concurrent_starts")
    def _check_max_starts(self, proposal: dict[str, Any]) -> int:
        if proposal["value"] < 1:
            raise ValueError("max_concurrent_starts must be >= 1")
        return int(proposal["value"])

    @validate("kernel_start_timeout")
    def _check_start_timeout(self, proposal: dict[str, Any]) -> float:
        if not proposal["value"] > 0:
            raise ValueError("kernel_start_timeout must be > 0")
        return float(proposal["value"])

    @validate("virtual_gpus")
    def _check_virtual_gpus(self, proposal: dict[str, Any]) -> int:
        if proposal["value"] < 0:
            raise ValueError("virtual_gpus must be >= 0")
        return int(proposal["value"])

    @validate("heartbeat_interval")
    def _check_heartbeat_interval(self, proposal: dict[str, Any]) -> float:
        if proposal["value"] <= 0:
            raise ValueError("heartbeat_interval must be > 0")
        return float(proposal["value"])

    def __init__(self, **kwargs: Any):
        """Settings as keywords (`LocalBackend(virtual_gpus=8)`) or from config (`c.LocalBackend.virtual_gpus = 8`
        with `LocalBackend(parent=app)`)."""
        super().__init__(**kwargs)
        self._runs: dict[str, _Run] = {}
        self._lock = threading.RLock()
        self._nvml_state: Any = None  # None: not tried; False: unavailable; else the pynvml module
        # Grace periods are waited out here, never on the caller's (the event loop's) thread.
        self._killers = ThreadPoolExecutor(max_workers=8, thread_name_prefix="gpusched-kill")

    # --- GPUs -------------------------------------------------------------------------------
    def _nvml(self) -> Any:
        if self._nvml_state is None:
            try:
                import pynvml

                pynvml.nvmlInit()
                self._nvml_state = pynvml
            except Exception as exc:  # library missing, no driver, no GPU: all mean "no NVML"
                log.info("NVML unavailable (%s); using %d virtual GPUs", exc, self.virtual_gpus)
                self._nvml_state = False
        return self._nvml_state or None

    def _nvml_count(self) -> int:
        nvml = self._nvml()
        if nvml is None:
            return 0
        try:
            return int(nvml.nvmlDeviceGetCount())
        except Exception:
            return 0

    def inventory(self) -> list[NodeSpec]:
        count = self._nvml_count()
        gpus = count if count > 0 else self.virtual_gpus
        return [NodeSpec(self.node_name, gpus, pool="local", cpus=self.cpus or None, memory=self.memory or None)]

    def pools(self) -> list[Pool]:
        kind = self.gpu_type or self._nvml_product() or ("virtual" if self._nvml_count() == 0 else "")
        return [Pool("local", gpu_type=kind or None)]

    def _nvml_product(self) -> str:
        """The GPUs' product name when they all agree, else ''."""
        nvml = self._nvml()
        if nvml is None:
            return ""
        try:
            names = {nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(self._nvml_count())}
        except Exception:
            return ""
        names = {n.decode() if isinstance(n, bytes) else str(n) for n in names}
        return names.pop() if len(names) == 1 else ""

    def gpu_memory_used_mib(self) -> dict[tuple[str, int], float]:
        nvml = self._nvml()
        if nvml is None:
            return {}
        out: dict[tuple[str, int], float] = {}
        try:
            for i in range(int(nvml.nvmlDeviceGetCount())):
                used = memory_used_bytes(nvml, nvml.nvmlDeviceGetHandleByIndex(i))
                out[(self.node_name, i)] = used / (1024 * 1024)
        except Exception as exc:
            log.warning("NVML memory query failed: %s", exc)
            return {}
        return out

    # --- launching ----------------------------------------------------------------------------
    def launch(self, req: LaunchRequest) -> None:
        notebook, cwd, job_dir = Path(req.notebook), Path(req.cwd), Path(req.job_dir)
        if not req.job_id:
            raise BackendError("a job needs an id")
        if not notebook.is_file():
            raise BackendError(f"notebook not found: {notebook}")
        if not cwd.is_dir():
            raise BackendError(f"working directory not found: {cwd}")
        if any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in req.gpu_ids):
            raise BackendError(f"GPU ids must be non-negative integers, got {req.gpu_ids!r}")
        if req.max_runtime is not None and not req.max_runtime > 0:
            raise BackendError(f"max_runtime must be positive, got {req.max_runtime!r}")
        try:
            params = validate_parameters(req.parameters)
        except ValueError as exc:
            raise BackendError(str(exc)) from None

        with self._lock:
            old = self._runs.get(req.job_id)
            if old is not None and old.proc.poll() is None:
                raise BackendError(f"job {req.job_id} is already running")
            # A runner of an earlier attempt that nobody reaped must not run alongside this one.
            if self.reap_orphan(job_dir):
                log.warning("job %s: killed a runner of an earlier attempt before relaunching", req.job_id)
            try:
                job_dir.mkdir(parents=True, exist_ok=True)
                for stale in (
                    heartbeat_path,
                    error_path,
                    kernel_pid_path,
                    kernel_ready_path,
                    pid_path,
                    launch_info_path,
                ):
                    stale(job_dir).unlink(missing_ok=True)
                exit_record_path(job_dir).unlink(missing_ok=True)  # an earlier launch's outcome is not this one's
                write_atomic(params_path(job_dir), json.dumps(params))
            except OSError as exc:
                raise BackendError(f"cannot prepare the job folder {job_dir}: {exc}") from None

            token = secrets.token_hex(16)
            cuda = ",".join(str(g) for g in req.gpu_ids)
            env = dict(os.environ)
            env.update(
                {
                    "CUDA_VISIBLE_DEVICES": cuda,
                    "CUDA_DEVICE_ORDER": "PCI_BUS_ID",  # indices as NVML numbers them
                    "PYTHONUNBUFFERED": "1",  # the log shows progress as it happens
                    "GPUSCHED_JOB_ID": req.job_id,
                    "GPUSCHED_JOB_DIR": str(job_dir),
                    **req.environment,  # (before the token: a job cannot forge it)
                    TOKEN_ENV: token,
                }
            )
            env.update(checkpoint_env(req, self.preempt_signal))  # the checkpoint folder, attempt, interval
            cmd = [
                self.python,
                "-m",
                RUNNER_MODULE,
                "--notebook",
                str(notebook),
                "--output",
                str(output_path(job_dir)),
                "--params",
                str(params_path(job_dir)),
                "--job-dir",
                str(job_dir),
                "--cwd",
                str(cwd),
                "--heartbeat-interval",
                repr(self.heartbeat_interval),
                "--max-log-bytes",
                str(max(self.max_log_bytes, 0)),
                "--start-slots",
                self.start_slots_dir or str(job_dir.parent / ".start-slots"),
                "--max-starts",
                str(self.max_concurrent_starts),
                "--kernel-start-timeout",
                repr(self.kernel_start_timeout),
                "--kernel-transport",
                self.kernel_transport.lower(),
            ]
            if req.kernel_name:
                cmd += ["--kernel", req.kernel_name]
            if req.max_runtime is not None:
                cmd += ["--max-runtime", repr(float(req.max_runtime) + self.runner_max_runtime_slack)]

            _append_log(
                job_dir,
                f"job {req.job_id}: starting {notebook} with CUDA_VISIBLE_DEVICES={cuda!r}"
                + (f", max_runtime {format_seconds(req.max_runtime)} s" if req.max_runtime else ""),
            )
            try:
                with open(log_path(job_dir), "ab", buffering=0) as logf:
                    proc = subprocess.Popen(
                        cmd,
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        cwd=str(cwd),
                        env=env,
                        start_new_session=True,  # own process group; survives the server
                        close_fds=True,
                    )
            except OSError as exc:
                raise BackendError(f"cannot start the runner ({self.python}): {exc}") from None
            started = time.time()
            try:
                write_atomic(pid_path(job_dir), f"{proc.pid}\n")
                write_atomic(
                    launch_info_path(job_dir),
                    json.dumps(
                        {
                            "job_id": req.job_id,
                            "pid": proc.pid,
                            "token": token,
                            "time": started,
                            "gpu_ids": list(req.gpu_ids),
                            "max_runtime": req.max_runtime,
                            "backend": self.name,
                            "node": self.node_name,
                        }
                    ),
                )
            except OSError as exc:
                terminate([proc.pid], tokens=[token], grace=0.0, children=[proc])
                raise BackendError(f"cannot write the pid file in {job_dir}: {exc}") from None
            deadline = time.monotonic() + float(req.max_runtime) if req.max_runtime is not None else None
            self._runs[req.job_id] = _Run(req, proc, token, started, deadline)

    # --- stopping -----------------------------------------------------------------------------
    def _stop(self, runs: list[_Run]) -> None:
        """SIGTERM, the grace period, SIGKILL: blocks for up to `kill_grace` + a few seconds."""
        if not runs:
            return
        groups: list[int | None] = []
        for run in runs:
            groups += [run.proc.pid, run.kernel_pid()]
        terminate(
            groups,
            tokens=[r.token for r in runs],
            grace=self.kill_grace,
            children=[r.proc for r in runs],
        )

    def begin_kill(self, job_id: str, reason: str) -> Callable[[], None] | None:
        """The fast half of `kill`: forget the job now (nothing is reported for it afterwards) and
        return the slow half (signals and the grace period) for the caller to run off its event
        loop; None if there is nothing to stop."""
        with self._lock:
            run = self._runs.pop(job_id, None)
        if run is None:
            return None
        _append_log(run.req.job_dir, f"job {job_id}: killed ({reason or 'no reason given'})")
        if run.stopping is not None:  # already being stopped by the backend (max_runtime): wait for that
            return run.stopping.result
        return lambda: self._stop([run])

    def kill(self, job_id: str, reason: str) -> None:
        """Stop a job and wait until its processes are gone (see `begin_kill` for the non-blocking form)."""
        finish = self.begin_kill(job_id, reason)
        if finish is not None:
            finish()

    def close(self) -> None:
        with self._lock:
            runs = list(self._runs.values())
            self._runs.clear()
        for run in runs:
            if run.stopping is None:
                _append_log(run.req.job_dir, f"job {run.req.job_id}: killed (backend closed)")
        self._stop([r for r in runs if r.stopping is None])
        for run in runs:
            if run.stopping is not None:
                run.stopping.result()
        with self._lock:
            nvml = self._nvml_state
            if nvml:
                try:
                    nvml.nvmlShutdown()
                except Exception:
                    pass
            self._nvml_state = None

    def _stop_in_background(self, run: _Run, final: BackendUpdate, stop: Callable[[], object]) -> None:
        """Stop what is left of `run` on a kill thread; `poll` reports `final` once that is done."""
        run.final = final
        run.stopping = self._killers.submit(stop)

    # --- watching -----------------------------------------------------------------------------
    def poll(self) -> list[BackendUpdate]:
        updates: list[BackendUpdate] = []
        with self._lock:
            for job_id, run in list(self._runs.items()):
                if run.stopping is not None:
                    if run.stopping.done():
                        del self._runs[job_id]
                        if run.final is not None:
                            updates.append(run.final)
                    continue
                rc = run.proc.poll()  # before the heartbeat: a final beat is never missed
                if not run.reported_started:  # started = its kernel answered; till then no news but the end
                    ready = _read_float(kernel_ready_path(run.req.job_dir))
                    if ready is not None:
                        run.reported_started = True
                        updates.append(BackendUpdate(job_id, "started", ready))
                if run.reported_started and (beat := self._read_heartbeat(run)) is not None:
                    updates.append(beat)
                if rc is None:
                    if run.deadline is not None and time.monotonic() >= run.deadline:
                        message = max_runtime_message(run.req.max_runtime or 0)
                        _append_log(run.req.job_dir, f"job {job_id}: {message}; killing it")
                        failed = BackendUpdate(job_id, "failed", time.time(), message)
                        self._stop_in_background(run, failed, partial(self._stop, [run]))
                    continue
                now = time.time()
                record = read_exit_record(run.req.job_dir)
                if rc == 0:
                    final = BackendUpdate(job_id, "succeeded", now, "", self._progress(run))
                elif record is not None and record.status == "not_started" and not run.reported_started:
                    final = BackendUpdate(job_id, "not_started", now, record.message)
                else:
                    message = _first_line(error_path(run.req.job_dir)) or _exit_message(rc, run.req.job_dir)
                    final = BackendUpdate(job_id, "failed", now, message, self._progress(run))
                # The runner stops its kernel; make sure nothing of the job outlives it (off this thread
                # when something is left, so a kernel that ignores SIGTERM does not stall the caller).
                kernel = run.kernel_pid()
                if any_alive([kernel], tokens=[run.token]):
                    left = partial(terminate, [kernel], tokens=[run.token], grace=1.0)
                    self._stop_in_background(run, final, left)
                    continue
                del self._runs[job_id]
                updates.append(final)
        return updates

    @staticmethod
    def _beat_fields(run: _Run) -> tuple[float | None, tuple[int, int] | None, dict | None]:
        """(time, (cells done, cells in total), activity report) of the last heartbeat."""
        data = _read_json(heartbeat_path(run.req.job_dir))
        if not isinstance(data, dict):
            return None, None, None
        t = data.get("time")
        done, total = data.get("cells_done"), data.get("cells_total")
        progress = (done, total) if isinstance(done, int) and isinstance(total, int) else None
        activity = data.get("activity") if isinstance(data.get("activity"), dict) else None
        return (float(t) if isinstance(t, (int, float)) else None), progress, activity

    def _read_heartbeat(self, run: _Run) -> BackendUpdate | None:
        t, progress, activity = self._beat_fields(run)
        if t is None or (run.last_beat is not None and t <= run.last_beat):  # nothing new (or older)
            return None
        run.last_beat = t
        saved = reported_checkpoint(heartbeat_path(run.req.job_dir))
        return BackendUpdate(run.req.job_id, "heartbeat", t, "", progress, activity, checkpoint_at=saved)

    def _progress(self, run: _Run) -> tuple[int, int] | None:
        return self._beat_fields(run)[1]

    def running(self) -> set[str]:
        with self._lock:
            return {job_id for job_id, run in self._runs.items() if run.proc.poll() is None}

    # --- after a restart --------------------------------------------------------------------
    def reap_orphan(self, job_dir: Path) -> bool:
        job_dir = Path(job_dir)
        info = _read_json(launch_info_path(job_dir))
        info = info if isinstance(info, dict) else {}
        token = info.get("token") if isinstance(info.get("token"), str) else None
        pid = _read_int(pid_path(job_dir))
        if pid is None and isinstance(info.get("pid"), int):
            pid = info["pid"]
        kpid = _read_int(kernel_pid_path(job_dir))
        with self._lock:
            for run in self._runs.values():
                if run.proc.pid == pid or run.token == token:
                    return False  # ours, running now: not an orphan

        runner_ok = pid is not None and self._is_runner(pid, token, job_dir)
        groups = [pid] if runner_ok else []
        if kpid is not None and self._is_kernel(kpid, token, runner_ok):
            groups.append(kpid)
        strays = token_pids(token)
        if not groups and not strays:
            return False
        _append_log(job_dir, "killing the processes of this job left from a previous server")
        log.warning("reaping orphaned job processes in %s (groups %s, others %s)", job_dir, groups, strays)
        return terminate(groups, tokens=[token], grace=self.kill_grace)

    @staticmethod
    def _is_runner(pid: int, token: str | None, job_dir: Path) -> bool:
        """Is `pid` the live runner of this job (not a process that reused the pid)?"""
        if not pid_alive(pid) or not is_group_leader(pid):
            return False
        if HAVE_PROC and token:
            return environ_has(pid, f"{TOKEN_ENV}={token}".encode())
        cmd = cmdline(pid)
        return RUNNER_MODULE in cmd and str(job_dir) in cmd

    @staticmethod
    def _is_kernel(pid: int, token: str | None, runner_alive: bool) -> bool:
        if not pid_alive(pid) or not is_group_leader(pid):
            return False
        if HAVE_PROC and token:
            return environ_has(pid, f"{TOKEN_ENV}={token}".encode())
        # Without /proc we cannot prove it; a kernel whose runner is gone exits by itself
        # (ipykernel watches its parent), so only a kernel of a live runner needs us.
        return runner_alive
