"""Small real notebooks for tests: on disk (`make_notebook`) or as JSON text (`notebook_json`)."""

from __future__ import annotations

from pathlib import Path

import nbformat

PYTHON3 = {"name": "python3", "display_name": "Python 3", "language": "python"}


def new_notebook(*cells: str, parameters: str | None = None, kernelspec: bool = True) -> nbformat.NotebookNode:
    """A notebook with these code cells; `parameters` becomes a first cell tagged 'parameters' (papermill's)."""
    nb = nbformat.v4.new_notebook()
    if kernelspec:
        nb.metadata["kernelspec"] = dict(PYTHON3)
    if parameters is not None:
        cell = nbformat.v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nb.cells.extend(nbformat.v4.new_code_cell(src) for src in cells)
    return nb


def make_notebook(path: Path, *cells: str, parameters: str | None = None, kernelspec: bool = True) -> Path:
    """Write a small real notebook (and its folder); `parameters` becomes the cell tagged 'parameters'."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(new_notebook(*cells, parameters=parameters, kernelspec=kernelspec), str(path))
    return path


def notebook_json(*cells: str) -> str:
    """A small valid notebook with these code cells (python3 kernel), as the text of an .ipynb file (for
    writing into another user's home, or sending)."""
    return nbformat.writes(new_notebook(*cells))


# A notebook cell whose kernel ignores SIGTERM, and so does a child that left its session (only the launch-token
# sweep finds it, and only SIGKILL after the grace period stops it). Its pids go to pids-{tag}.json (`tag`: a
# parameter of the notebook).
STUBBORN = """
import json, os, signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(
    [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
    start_new_session=True,
)
json.dump({"kernel": os.getpid(), "child": child.pid}, open(f"pids-{tag}.json", "w"))
"""
