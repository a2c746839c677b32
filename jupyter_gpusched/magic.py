"""`%gpusched` and `%%gpusched`: the CLI's commands inside a notebook, plus "run this cell as a GPU job".

    %load_ext jupyter_gpusched
    %gpusched submit train.ipynb --gpus 2 --priority high -p lr=0.1
    %gpusched list | status ID | cancel ID | logs ID | queues | cluster | forecast

    %%gpusched --gpus 1 --priority high
    import torch; print(torch.cuda.device_count())

Both go through the one client (client.py), which finds the server from inside the kernel.
Errors are one line, never a traceback.
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import time
from pathlib import Path

import nbformat
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from . import cli
from .client import Client, GPUSchedError

CELL_DIR = ".gpusched-cells"  # where %%gpusched writes the notebooks it submits


class _Exit(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports instead of calling sys.exit inside a kernel."""

    def error(self, message: str) -> None:
        raise _Exit(f"{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> None:
        if message:
            sys.stderr.write(message)
        raise _Exit("")


def _cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%gpusched", description="Run this cell's code as a GPU job and show its output here.")
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--priority", choices=["high", "normal", "low"], default="normal")
    p.add_argument("--tenant")
    p.add_argument("--max-runtime", type=float)
    p.add_argument("--preemptible", action="store_true")
    p.add_argument("--no-wait", action="store_true", help="submit and return at once")
    p.add_argument("--url")
    p.add_argument("--token")
    return p


def cell_notebook(code: str, folder: Path) -> Path:
    """Write the cell's code as a one-cell notebook (named by its content) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(code))
    path = folder / f"cell-{hashlib.sha256(code.encode()).hexdigest()[:10]}.ipynb"
    nbformat.write(nb, str(path))
    return path


def show_outputs(notebook_json: bytes) -> None:
    """Replay the executed cells' outputs in the current notebook."""
    nb = nbformat.reads(notebook_json.decode("utf-8"), as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "code" or "injected-parameters" in cell.metadata.get("tags", []):
            continue
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                (sys.stderr if out.name == "stderr" else sys.stdout).write(out.text)
            elif out.output_type in ("display_data", "execute_result"):
                display(dict(out.data), raw=True)
            elif out.output_type == "error":
                sys.stderr.write(f"{out.ename}: {out.evalue}\n")


@magics_class
class GPUSchedMagics(Magics):
    @line_cell_magic
    def gpusched(self, line: str, cell: str | None = None):
        try:
            if cell is None:
                self._line(line)
            else:
                self._cell(line, cell)
        except _Exit as exc:
            if str(exc):
                print(str(exc), file=sys.stderr)
        except GPUSchedError as exc:
            print(f"gpusched: {exc}", file=sys.stderr)
        except KeyboardInterrupt:
            print("gpusched: interrupted (the job keeps its place; cancel it with %gpusched cancel ID)", file=sys.stderr)

    def _line(self, line: str) -> None:
        # the CLI's own commands; errors are reported in the cell instead of exiting
        args = cli.build_parser("%gpusched", _Parser).parse_args(shlex.split(line))
        if args.command == "bench":
            raise _Exit("%gpusched: bench runs from a terminal: jupyter gpusched bench --help")
        cli.run(args, out=sys.stdout)

    def _cell(self, line: str, code: str) -> None:
        args = _cell_parser().parse_args(shlex.split(line))
        client = Client(args.url, args.token)
        path = cell_notebook(code, Path.cwd() / CELL_DIR)
        job = client.submit(
            str(path),
            gpus=args.gpus,
            priority=args.priority,
            tenant=args.tenant,
            max_runtime=args.max_runtime,
            preemptible=args.preemptible,
        )
        print(f"submitted {job['id']} ({job['gpus']} GPU, {job['priority']})", file=sys.stderr)
        if args.no_wait:
            return
        while job["state"] not in cli.TERMINAL:
            time.sleep(1.0)
            job = client.get(job["id"])
        try:
            show_outputs(client.output(job["id"]))
        except GPUSchedError:
            pass  # no executed notebook (e.g. cancelled before it ran)
        if job["state"] != "SUCCEEDED":
            print(f"gpusched: job {job['id']} {job['state']}: {job.get('message') or job.get('reason')}", file=sys.stderr)


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(GPUSchedMagics)
