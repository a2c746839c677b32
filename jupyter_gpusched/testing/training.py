"""A small training notebook that checkpoints with `jupyter_gpusched.checkpoint`, for the checkpoint tests and
the checkpoint-loss benchmark. Each step sleeps `step_s`; `trace.txt` in its folder gets one line per event:
`start <attempt> <step>`, `step <attempt> <step>` (each step), `saved <attempt> <step>`, `preempted <attempt> <step>`, `done <attempt> <step>`
(`preempted` once the last save is under way, after `save_s`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.local import LocalBackend
from ..backends.preemption import checkpoint_dir
from ..core import Pool, Tenant
from ..core.health import HealthConfig
from .notebooks import make_notebook
from .service import run_until, service_in

TRAINING = """
import signal, time
from jupyter_gpusched import checkpoint

def trace(what, step):
    with open(trace_file, "a") as f:
        f.write(f"{what} {checkpoint.attempt()} {step}\\n")

state = checkpoint.load() or {"step": 0}
trace("start", state["step"])
if use_helper:
    # a last save that takes `save_s` (a large model): longer than a plain kill's few seconds
    checkpoint.on_preempt(lambda: (time.sleep(save_s), trace("preempted", state["step"]), state)[2])
if ignore_signal:  # a job that does not listen: only the grace period's end stops it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
due = checkpoint.every(save_every)
while state["step"] < steps:
    time.sleep(step_s)
    state["step"] += 1
    trace("step", state["step"])
    if due:
        checkpoint.save(state)
        trace("saved", state["step"])
trace("done", state["step"])
"""

PARAMETERS = 'steps = 200\nstep_s = 0.05\nsave_every = 1.0\nsave_s = 0.0\nuse_helper = True\nignore_signal = False\ntrace_file = "trace.txt"'


def make_training_notebook(path: Path) -> Path:
    return make_notebook(path, TRAINING, parameters=PARAMETERS)


def read_trace(path: Path) -> list[tuple[str, int, int]]:
    """(event, attempt, step) per line of a training notebook's trace."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            out.append((parts[0], int(parts[1]), int(parts[2])))
    return out


def preempting_service(folder: Path, grace: float, pools: tuple[Pool, ...] = ()):
    """Two tenants on 2 virtual GPUs: `research` owns none and borrows both; `prod` owns both and takes them back.
    `pools`: the service's pool terms (the local backend's pool is "local")."""
    backend = LocalBackend(virtual_gpus=2, heartbeat_interval=0.3, preempt_grace=grace)
    return service_in(
        folder,
        backend,
        tenants=(Tenant("research", 0, 2), Tenant("prod", 2)),
        default_tenant="research",
        health=HealthConfig(),
        memory_check_interval=0.0,
        pools=pools,
    )


def two_saves(trace: list[tuple[str, int, int]]) -> bool:
    return sum(e == "saved" for e, _, _ in trace) >= 2


def train_then_preempt(
    folder: Path,
    grace: float,
    ready: Callable[[list[tuple[str, int, int]]], bool] = two_saves,
    pools: tuple[Pool, ...] = (),
    **params: Any,
) -> tuple[list[tuple[str, int, int]], dict]:
    """Run the training notebook as `research`, preempt it with a `prod` job once `ready(trace)` holds (it saved
    twice), let it finish on attempt 2. Returns its trace and what the core and the store said about it."""
    service = preempting_service(folder, grace, pools)
    root = folder / "root"
    make_training_notebook(root / "train.ipynb")
    make_notebook(root / "quick.ipynb", "x = 1")
    seen: dict = {}
    try:
        job = service.submit(notebook="train.ipynb", owner="alice", gpus=2, parameters=params)
        trace = root / "trace.txt"
        run_until(service, lambda: ready(read_trace(trace)), 90, "the moment to preempt it")
        if any(e == "saved" for e, _, _ in read_trace(trace)):
            run_until(service, lambda: service.scheduler.jobs[job.id].last_checkpoint_at is not None, 30, "reported")
        seen["core"] = service.scheduler.jobs[job.id].last_checkpoint_at
        seen["store"] = {j.id: j for j, _ in service.store.load_jobs()}[job.id].last_checkpoint_at
        urgent = service.submit(notebook="quick.ipynb", owner="bob", tenant="prod", gpus=2, priority="high")
        run_until(service, lambda: service.scheduler.jobs[urgent.id].state.value == "SUCCEEDED", 90, "prod job")
        run_until(service, lambda: service.scheduler.jobs[job.id].state.value == "SUCCEEDED", 120, "resumed job")
        seen["attempts"] = service.scheduler.jobs[job.id].attempts
        seen["preemptions"] = service.scheduler.jobs[job.id].preemptions
        seen["folder"] = checkpoint_dir(service.jobs_dir / job.id)
    finally:
        service.backend.close()
    return read_trace(trace), seen
