"""Run one notebook job with papermill; started by LocalBackend in its own session.

    python -m jupyter_gpusched.backends.runner --notebook IN --output OUT --params PARAMS.json
        --job-dir DIR [--kernel NAME] [--cwd DIR] [--heartbeat-interval S] [--max-runtime S]

What it leaves in DIR (layout in base.py): `pid` (this process), `kernel_pid` (the kernel,
as soon as it is started), `heartbeat` (every interval and after each cell, with an `activity`
report for the service's stall watch: the cell running and since when, the kernel's state, the
last output, the CPU and I/O of the job's processes and its GPUs' use; activity.py), `error.txt`
(one line, on failure), `kernel_ready` (the time its kernel answered kernel_info) and, once
the notebook has run to its end or failed on its own, `exit.json` (exitrecord.py: status,
message, time; written durably before the runner exits, so a server that was down meanwhile
learns the true outcome). The executed notebook is written to OUT as cells finish, also when
a cell fails (papermill marks the failing cell).

Bringing the kernel up (kernelstart.py): the runner waits for a start slot, then its kernel
has a load-scaled deadline to answer kernel_info. A kernel that cannot start, dies or never
completes that handshake is not the notebook's failure: the exit record says "not_started"
and the service puts the job back in line.

A signal stops the run (kernel first). If every cell had already run, or a cell had failed,
the run is over all but the clean-up: the signal only cuts that short, and the exit record
says how the notebook ended. Otherwise the run was interrupted and leaves no exit record.

Exit status: 0 success; 1 a cell raised; 2 any other failure (no such kernel, the kernel
died while running cells ...); 3 the runner's own max_runtime safety net fired; 4 the kernel
never came up (a launch failure); 128+N killed by signal N (after stopping the kernel).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
import uuid
from pathlib import Path
from typing import Any

from ..checkpoint import DIR_ENV as CHECKPOINT_DIR_ENV
from ..checkpoint import last_saved
from .activity import GpuSampler, process_figures
from .base import (
    error_path,
    heartbeat_path,
    kernel_pid_path,
    kernel_ready_path,
    log_path,
    pid_path,
    validate_parameters,
    write_atomic,
)
from .exitrecord import EXIT_NOT_STARTED, ExitRecord, ExitStatus, write_exit_record
from .kernelstart import StartSlot, default_max_starts, kernel_files, pick_transport, start_deadline
from .local import format_seconds, max_runtime_message
from .logcap import DEFAULT_MAX_LOG_BYTES, LogPump
from .processes import TOKEN_ENV, terminate

EXIT_OK = 0
EXIT_CELL_ERROR = 1
EXIT_ERROR = 2
EXIT_MAX_RUNTIME = 3
DEFAULT_KERNEL_START_TIMEOUT = 60.0  # seconds for kernel_info to be answered, before the load factor
KERNEL_STOP_GRACE = 1.5  # seconds between SIGTERM and SIGKILL for the kernel's group

log = logging.getLogger("gpusched.runner")


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


class Run:
    """State shared by the main thread (papermill), the heartbeat thread and signal handlers.
    Signal handlers run on the main thread between bytecodes, so the only lock here is reentrant:
    `beat` serializes the two threads' heartbeat writes (a late write of an older beat would
    otherwise replace a newer one) and a handler interrupting the main thread's beat may re-enter."""

    def __init__(self, job_dir: Path, output: Path, interval: float, max_runtime: float | None):
        self.job_dir = job_dir
        self.output = output
        self.interval = interval
        self.deadline = time.monotonic() + max_runtime if max_runtime else None
        self.max_runtime = max_runtime
        self.cells_done = 0
        self.cells_total: int | None = None  # unknown until the notebook is read
        self.kernel_pid: int | None = None
        self.connection_file: str | None = None  # the kernel's, removed if we exit abruptly
        self.nb: Any = None  # the notebook papermill is executing (set when the kernel is up)
        self.exiting = False
        self.aborted_with: int | None = None  # abort()'s exit code, once another thread is ending the run
        self.stop = threading.Event()
        self.started = time.time()
        self.cell_error: str | None = None  # "NameError: x (cell 3)" once a cell has failed
        self.failure = ""  # the last word given to fail()
        self.pump: LogPump | None = None  # our and the kernel's output -> log.txt, capped
        # What the stall watch reads (core/stalls.py); written on the main thread, read by the heartbeat.
        self.execution_state = "starting"  # the kernel's, as the runner sees it: busy while a cell runs
        self.cell_index: int | None = None  # the notebook cell running now
        self.cell_started: float | None = None
        self.last_output: float | None = None  # the last stdout/stderr text of the notebook
        self.gpus: GpuSampler | None = None  # NVML for the job's GPUs (inert without it)
        self.beat_cpu = 0.0  # CPU seconds the heartbeat thread has used: sampling is not the job's work
        # Bringing the kernel up (kernelstart.py): set when it answered kernel_info.
        self.kernel_up = threading.Event()
        self.kernel_starting = False  # a start slot is held and the kernel is being launched
        self.slot: StartSlot | None = None
        self.beat_lock = threading.RLock()

    # --- files ------------------------------------------------------------------------------
    def activity(self, now: float) -> dict[str, Any]:
        """The progress report of this beat (core.stalls.Activity's fields)."""
        return {
            "time": now,
            "cells_done": self.cells_done,
            "cell_index": self.cell_index,
            "cell_started": self.cell_started,
            "execution_state": self.execution_state,
            "last_output": self.last_output,
            **process_figures(
                (self.kernel_pid,) if self.kernel_pid else (),
                cpu_offset=self.beat_cpu,
                look=threading.current_thread() is not threading.main_thread(),  # cells never wait on it
            ),
            **(self.gpus.sample() if self.gpus is not None else {}),
        }

    def beat(self) -> None:
        with self.beat_lock:
            now = time.time()
            data: dict[str, Any] = {
                "time": now,
                "cells_done": self.cells_done,
                "cells_total": self.cells_total,
                "pid": os.getpid(),
                "kernel_pid": self.kernel_pid,
                "checkpoint_at": last_saved() if os.environ.get(CHECKPOINT_DIR_ENV) else None,  # checkpoint.py's
            }
            try:
                data["activity"] = self.activity(now)
            except Exception as exc:  # a figure that cannot be had never costs the heartbeat
                print(f"gpusched-runner: cannot sample activity: {exc}", file=sys.stderr)
            try:
                write_atomic(heartbeat_path(self.job_dir), json.dumps(data))
            except OSError as exc:
                print(f"gpusched-runner: cannot write heartbeat: {exc}", file=sys.stderr)

    def fail(self, message: str, label: str = "FAILED") -> None:
        self.failure = message
        try:
            write_atomic(error_path(self.job_dir), _one_line(message) + "\n")
        except OSError:
            pass
        print(f"gpusched-runner: {label}: {message}", file=sys.stderr, flush=True)

    def record_exit(self, ok: bool, message: str, code: int) -> None:
        """The durable word on how the notebook ended (exitrecord.py); best effort, like every file here."""
        status: ExitStatus = "succeeded" if ok else "not_started" if code == EXIT_NOT_STARTED else "failed"
        record = ExitRecord(
            status=status,
            message="" if ok else _one_line(message),
            time=time.time(),
            started=self.started,
            exit_code=code,
            cells_done=self.cells_done,
            cells_total=self.cells_total,
            token=os.environ.get(TOKEN_ENV),
        )
        try:
            write_exit_record(self.job_dir, record)
        except OSError as exc:
            print(f"gpusched-runner: cannot write the exit record: {exc}", file=sys.stderr, flush=True)

    def ran_to_the_end(self) -> bool:
        """Has every code cell run (the kernel was up and executed them all)?"""
        return self.nb is not None and self.cells_total is not None and self.cells_done >= self.cells_total

    def set_kernel_pid(self, pid: int | None) -> None:
        if not pid or pid == self.kernel_pid:
            return
        self.kernel_pid = pid
        try:
            write_atomic(kernel_pid_path(self.job_dir), f"{pid}\n")
        except OSError as exc:
            print(f"gpusched-runner: cannot write kernel pid: {exc}", file=sys.stderr)

    # --- stopping -----------------------------------------------------------------------------
    def stop_kernel(self, grace: float = KERNEL_STOP_GRACE) -> None:
        """Stop the kernel's whole process group (the kernel is in its own session)."""
        if self.kernel_pid:
            terminate([self.kernel_pid], grace=grace)

    def save_partial_output(self) -> None:
        """Best effort: write what has run so far, atomically (papermill writes in place)."""
        nb = self.nb
        if nb is None:
            return
        try:
            import nbformat

            write_atomic(self.output, nbformat.writes(nb))
        except Exception as exc:  # a notebook mid-update may not serialize; the last autosave stays
            print(f"gpusched-runner: could not save partial output: {exc}", file=sys.stderr)

    def abort(self, message: str, code: int, interrupted: bool = True) -> None:
        """End the run now, from a signal handler (`interrupted`) or the watchdog: kernel first, then us."""
        if self.exiting:
            return
        self.exiting = True
        self.aborted_with = code
        outcome: tuple[bool, str] | None
        if not interrupted:  # the watchdog: the notebook's own failure
            outcome = (False, message)
        elif self.cell_error is not None:  # a cell had failed: that is how the notebook ended
            outcome = (False, self.cell_error)
        elif self.ran_to_the_end():  # only the clean-up was cut short
            outcome = (True, "")
        else:  # interrupted: no record; the service re-runs it by its retry policy
            outcome = None
        if outcome is None or not outcome[0]:
            self.fail(message if outcome is None else outcome[1], label="stopping")
        self.stop_kernel()
        for path in kernel_files(self.connection_file or ""):
            path.unlink(missing_ok=True)
        self.save_partial_output()
        self.beat()
        if outcome is not None:
            self.record_exit(outcome[0], outcome[1], code)
        sys.stderr.flush()
        if self.pump is not None:
            self.pump.close()
        os._exit(code)

    def await_abort(self) -> int:
        """The watchdog's abort() stopped the kernel under papermill, which then failed: the abort's
        outcome (max_runtime and its message) is the run's, and abort() ends the process (os._exit)."""
        time.sleep(60)  # (a bound, should abort() itself fail)
        return self.aborted_with if self.aborted_with is not None else EXIT_ERROR

    def on_signal(self, signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        self.abort(f"terminated by signal {name}", 128 + signum)

    # --- heartbeat + watchdog -----------------------------------------------------------------
    def heartbeat_loop(self) -> None:
        while not self.stop.wait(self.interval):
            self.beat()
            self.beat_cpu = time.thread_time()
            if self.deadline is not None and time.monotonic() > self.deadline:
                self.abort(max_runtime_message(self.max_runtime or 0), EXIT_MAX_RUNTIME, interrupted=False)

    # --- bringing the kernel up (kernelstart.py) --------------------------------------------
    def take_start_slot(self, args: argparse.Namespace) -> None:
        """Before papermill is imported: wait for one of the start slots (held until kernel_info is answered)."""
        if args.start_slots is None:
            return
        self.slot = StartSlot(args.start_slots, args.max_starts)
        waited = self.slot.acquire()
        if waited >= 1.0:
            print(f"gpusched-runner: waited {waited:.1f} s for a kernel start slot", flush=True)

    async def begin_kernel_start(self, km: Any, args: argparse.Namespace) -> None:
        """Before the kernel is launched: choose the transport, arm the deadline."""
        if self.kernel_starting or self.kernel_up.is_set():
            return
        self.kernel_starting = True
        if not km.connection_file:
            from jupyter_core.paths import jupyter_runtime_dir

            runtime = Path(jupyter_runtime_dir())
            runtime.mkdir(parents=True, exist_ok=True)
            km.connection_file = str(runtime / f"kernel-gpusched-{uuid.uuid4().hex[:12]}.json")
        km.transport = pick_transport(args.kernel_transport, km.connection_file)
        if km.transport == "ipc":  # sockets beside the connection file, never in the notebook's folder
            km.ip = os.path.splitext(km.connection_file)[0] + "-ipc"
        deadline = start_deadline(args.kernel_start_timeout)
        threading.Thread(target=self._start_watchdog, args=(deadline,), name="gpusched-start", daemon=True).start()

    def _start_watchdog(self, deadline: float) -> None:
        """The handshake's deadline, kept off the main thread: it holds even if that thread is stuck (in a send)."""
        if not self.kernel_up.wait(deadline):
            self.abort(
                f"the kernel did not answer kernel_info within {format_seconds(deadline)} s",
                EXIT_NOT_STARTED,
                interrupted=False,
            )

    def kernel_answered(self) -> None:
        """The kernel replied to kernel_info: the run has started; hand the slot to the next runner."""
        if self.kernel_up.is_set():
            return
        self.kernel_up.set()
        if self.slot is not None:
            self.slot.release()
        try:
            write_atomic(kernel_ready_path(self.job_dir), f"{time.time()!r}\n")
        except OSError as exc:
            print(f"gpusched-runner: cannot write kernel_ready: {exc}", file=sys.stderr)

    def start_failed(self, exc: BaseException) -> bool:
        """Did `exc` end the run while the kernel was coming up (a launch failure, not the notebook's)?
        A kernel that does not exist or cannot be executed will never start: that stays a failure."""
        from jupyter_client.kernelspec import NoSuchKernel

        permanent = (NoSuchKernel, FileNotFoundError, PermissionError)
        return self.kernel_starting and not self.kernel_up.is_set() and not isinstance(exc, permanent)

    # --- nbclient hooks (called on the main thread) -------------------------------------------
    def on_notebook_start(self, notebook: Any = None, **_: Any) -> None:
        self.kernel_answered()  # nbclient calls this right after the kernel answered kernel_info
        if notebook is not None:
            self.nb = notebook
            self.cells_total = count_code_cells(notebook)
        self.execution_state = "idle"
        self.beat()

    def on_cell_execute(self, cell_index: int | None = None, **_: Any) -> None:
        self.cell_index, self.cell_started, self.execution_state = cell_index, time.time(), "busy"
        self.beat()

    def on_output(self, text: str) -> None:
        if text:
            self.last_output = time.time()

    def on_cell_executed(self, cell: Any = None, execute_reply: Any = None, **_: Any) -> None:
        self.cell_index, self.cell_started, self.execution_state = None, None, "idle"
        content = (execute_reply or {}).get("content") or {}
        allowed = cell is not None and "raises-exception" in cell.get("metadata", {}).get("tags", [])
        if content.get("status") == "error" and not allowed:  # a failed cell is not done
            if self.cell_error is None:
                what = f"{content.get('ename', 'Error')}: {_one_line(content.get('evalue', ''))}".rstrip(": ")
                where = cell.get("execution_count") if cell is not None else None
                self.cell_error = f"{what} (cell {where or self.cells_done + 1})"
        elif cell is None or not is_injected(cell):  # the user counts their own cells, not papermill's
            self.cells_done += 1
        self.beat()


class _OutputFormatter(logging.Formatter):
    """papermill logs a cell's printed text as one record per output, text and its newline included: the
    log shows it as printed, without the blank line the handler's own newline would add."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return text[:-1] if text.endswith("\n") else text


class OutputClock:
    """papermill's stdout_file / stderr_file: notes when the notebook wrote (the text itself
    reaches log.txt through log_output), keeps nothing."""

    def __init__(self, run: Run):
        self.run = run

    def write(self, text: str) -> int:
        self.run.on_output(text)
        return len(text)

    def flush(self) -> None:
        pass


def count_code_cells(nb: Any) -> int:
    """The notebook's own code cells nbclient will execute (non-empty, not tagged skip-execution; not the
    parameters cell papermill injects)."""
    return sum(
        1
        for c in nb.cells
        if c.get("cell_type") == "code"
        and str(c.get("source", "")).strip()
        and "skip-execution" not in c.get("metadata", {}).get("tags", [])
        and not is_injected(c)
    )


def is_injected(cell: Any) -> bool:
    return "injected-parameters" in cell.get("metadata", {}).get("tags", [])


def _kernel_manager_class(run: Run, args: argparse.Namespace) -> type:
    """An AsyncKernelManager that waits for a start slot and reports its kernel's pid the moment the process
    exists."""
    from jupyter_client.manager import AsyncKernelManager

    class RecordingKernelManager(AsyncKernelManager):
        def _record(self) -> None:
            run.set_kernel_pid(getattr(self.provisioner, "pid", None))
            run.connection_file = self.connection_file or None

        async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
            await super()._async_launch_kernel(kernel_cmd, **kw)
            self._record()

        # (jupyter_client types start_kernel as KernelManager's sync one; AsyncKernelManager's is async)
        async def start_kernel(self, **kw: Any) -> None:  # type: ignore[override]  # public fallback if the above is renamed
            await run.begin_kernel_start(self, args)
            await super().start_kernel(**kw)
            self._record()

    return RecordingKernelManager


def resolve_kernel(nb: Any, requested: str | None) -> str:
    if requested:
        return requested
    name = (nb.metadata.get("kernelspec") or {}).get("name")
    return name or "python3"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jupyter_gpusched.backends.runner", description=__doc__.split("\n")[0])
    p.add_argument("--notebook", required=True, type=Path)
    p.add_argument("--output", required=True, type=Path)
    p.add_argument("--params", type=Path, default=None, help="JSON file with the parameters to inject")
    p.add_argument("--job-dir", required=True, type=Path)
    p.add_argument("--kernel", default=None)
    p.add_argument("--cwd", type=Path, default=None)
    p.add_argument("--heartbeat-interval", type=float, default=5.0)
    p.add_argument("--max-runtime", type=float, default=None, help="safety net: exit past this many seconds")
    p.add_argument(
        "--max-log-bytes", type=int, default=DEFAULT_MAX_LOG_BYTES, help="cap of log.txt (its head is dropped); 0: none"
    )
    p.add_argument("--start-slots", type=Path, default=None, help="folder of the start slots runners share")
    p.add_argument("--max-starts", type=int, default=default_max_starts(), help="kernels brought up at once")
    p.add_argument(
        "--kernel-start-timeout",
        type=float,
        default=DEFAULT_KERNEL_START_TIMEOUT,
        help="seconds for the kernel to answer kernel_info, times the load per CPU (1 to 4)",
    )
    p.add_argument("--kernel-transport", choices=("ipc", "tcp"), default="ipc", help="ipc where it works, else tcp")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    job_dir: Path = args.job_dir
    run = Run(job_dir, args.output, max(args.heartbeat_interval, 0.05), args.max_runtime)
    # Install the handlers before anything slow: from here on a SIGTERM stops the kernel too.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, run.on_signal)
    write_atomic(pid_path(job_dir), f"{os.getpid()}\n")
    run.beat()
    # From here on our output and the kernel's (which inherits our stdout) reach log.txt through the pump.
    run.pump = LogPump(log_path(job_dir), args.max_log_bytes)
    try:
        return _run(run, args)
    finally:
        run.pump.close()


def _run(run: Run, args: argparse.Namespace) -> int:
    job_dir: Path = args.job_dir
    run.gpus = GpuSampler()
    threading.Thread(target=run.heartbeat_loop, name="gpusched-heartbeat", daemon=True).start()

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_OutputFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    print(
        f"gpusched-runner: pid {os.getpid()}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')!r}"
        + (f", max_runtime safety net {format_seconds(args.max_runtime)} s" if args.max_runtime else ""),
        flush=True,
    )
    run.take_start_slot(args)
    try:
        import nbformat
        import papermill
        from papermill.exceptions import PapermillExecutionError
    except ImportError as exc:
        run.fail(f"the runner cannot import its dependencies: {exc}")
        run.exiting = True
        run.record_exit(False, run.failure, EXIT_ERROR)
        return EXIT_ERROR
    try:
        parameters = validate_parameters(json.loads(args.params.read_text(encoding="utf-8")) if args.params else {})
        nb = nbformat.read(str(args.notebook), as_version=4)
        kernel = resolve_kernel(nb, args.kernel)
        run.cells_total = count_code_cells(nb)  # the notebook's own cells (papermill's parameters cell is not one)
        run.beat()
        papermill.execute_notebook(
            str(args.notebook),
            str(args.output),
            parameters=parameters,
            kernel_name=kernel,
            cwd=str(args.cwd) if args.cwd else None,
            log_output=True,
            progress_bar=False,
            # nbclient options, passed through papermill's engine:
            # the watchdog (begin_kernel_start) holds the real, load-scaled deadline; this is a backstop
            start_timeout=int(args.kernel_start_timeout * 10),
            kernel_manager_class=_kernel_manager_class(run, args),
            stdout_file=OutputClock(run),
            stderr_file=OutputClock(run),
            on_notebook_start=run.on_notebook_start,
            on_cell_execute=run.on_cell_execute,
            on_cell_executed=run.on_cell_executed,
        )
    except PapermillExecutionError as exc:
        if run.aborted_with is not None:
            return run.await_abort()
        where = exc.exec_count if exc.exec_count is not None else exc.cell_index + 1
        what = f"{exc.ename}: {_one_line(exc.evalue)}" if _one_line(exc.evalue) else exc.ename
        run.fail(f"{what} (cell {where})")
        code = EXIT_CELL_ERROR
    except Exception as exc:
        if run.aborted_with is not None:
            return run.await_abort()
        traceback.print_exc()
        text = _one_line(str(exc))
        code = EXIT_NOT_STARTED if run.start_failed(exc) else EXIT_ERROR
        what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        run.fail(f"the kernel did not start: {what}" if code == EXIT_NOT_STARTED else what)
    else:
        code = EXIT_OK
    run.exiting = True  # the outcome is known: a signal from here on only cuts the clean-up short
    if run.slot is not None:
        run.slot.release()
    run.stop.set()
    run.record_exit(code == EXIT_OK, run.failure, code)
    # nbclient shut the kernel down; stop anything the notebook left behind in its group.
    run.stop_kernel(grace=1.0)
    kernel_pid_path(job_dir).unlink(missing_ok=True)
    run.beat()
    print(f"gpusched-runner: exit {code}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
