"""A small training notebook that checkpoints with `jupyter_gpusched.checkpoint`, for the checkpoint tests and
the checkpoint-loss benchmark. Each step sleeps `step_s`; `trace.txt` in its folder gets one line per event:
`start <attempt> <step>`, `saved <attempt> <step>`, `preempted <attempt> <step>`, `done <attempt> <step>`."""

from __future__ import annotations

from pathlib import Path

from .notebooks import make_notebook

TRAINING = """
import signal, time
from jupyter_gpusched import checkpoint

def trace(what, step):
    with open(trace_file, "a") as f:
        f.write(f"{what} {checkpoint.attempt()} {step}\\n")

state = checkpoint.load() or {"step": 0}
trace("start", state["step"])
if use_helper:
    checkpoint.on_preempt(lambda: (trace("preempted", state["step"]), state)[1])
if ignore_signal:  # a job that does not listen: only the grace period's end stops it
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
due = checkpoint.every(save_every)
while state["step"] < steps:
    time.sleep(step_s)
    state["step"] += 1
    if due:
        checkpoint.save(state)
        trace("saved", state["step"])
trace("done", state["step"])
"""

PARAMETERS = (
    'steps = 200\nstep_s = 0.05\nsave_every = 1.0\nuse_helper = True\nignore_signal = False\ntrace_file = "trace.txt"'
)


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
