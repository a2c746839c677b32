"""`%gpusched` and `%%gpusched`: the CLI's commands inside a notebook, plus "run this cell as a GPU job".

    %load_ext jupyter_gpusched
    %gpusched submit train.ipynb --gpus 2 --priority high -p lr=0.1
    %gpusched list | status ID | cancel ID | logs ID | output ID | queues | cluster | forecast

    %%gpusched --gpus 1 --priority high
    import torch; print(torch.cuda.device_count())

Both go through the one client (client.py), which finds the server from inside the kernel, and take
the CLI's submit options (one per job-spec field). Errors are one line, never a traceback. A `%%gpusched`
cell whose job does not succeed (or cannot be submitted) fails, so "Run All" stops there, unless
`--no-raise`. The cell's code travels as a one-cell notebook named after the calling notebook and the
cell's execution count (`train.cell-7.ipynb`) in the hidden `.gpusched-cells/` folder beside it (the
server reads notebooks only inside its root); it is removed once the job has ended (kept with `--no-wait`).
"""

from __future__ import annotations

import argparse
import hashlib
import shlex
import sys
import time
from pathlib import Path
from typing import NoReturn

import nbformat
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

from . import cli
from .cli.options import add_spec_options, spec_from_args
from .client import Client, GPUSchedError

CELL_DIR = ".gpusched-cells"  # where %%gpusched writes the notebooks it submits
_GLOBAL_OPTIONS = ("--url", "--token")  # they take a value: the command is the first word after them


class _Exit(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports instead of calling sys.exit inside a kernel."""

    def error(self, message: str) -> NoReturn:
        raise _Exit(f"{self.prog}: error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _Exit("")


def _cell_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="%%gpusched", description="Run this cell's code as a GPU job and show its output here.")
    add_spec_options(p)
    p.add_argument("--no-wait", action="store_true", help="submit and return at once")
    p.add_argument("--no-raise", action="store_true", help="a failed job does not fail the cell")
    p.add_argument("--url")
    p.add_argument("--token")
    return p


def _split(line: str, prog: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:  # e.g. an unclosed quote
        raise _Exit(f"{prog}: error: {exc}") from None


def _command_word(argv: list[str]) -> str | None:
    """The command in a `%gpusched` line: its first word that is not a global option (or an option's value)."""
    words = iter(argv)
    for word in words:
        if word in _GLOBAL_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _check_command(argv: list[str]) -> None:
    """One clear line for a line that names no command, a terminal-only one, or an unknown one."""
    known = ", ".join(cli.SERVER_COMMANDS)
    command = _command_word(argv)
    if command is None:
        if not {"-h", "--help"} & set(argv):
            raise _Exit(f"%gpusched: name a command: {known} (%gpusched --help)")
    elif command in cli.SELF_PARSING_COMMANDS:
        raise _Exit(f"%gpusched: {command} runs from a terminal: jupyter gpusched {command} --help")
    elif command not in cli.SERVER_COMMANDS:
        raise _Exit(f"%gpusched: unknown command {command!r}; known commands: {known}")


class JobFailed(RuntimeError):
    """A `%%gpusched` cell's job did not succeed: the cell fails, shown as one line (no traceback)."""

    def _render_traceback_(self) -> list[str]:  # IPython shows this instead of a traceback
        return [f"{type(self).__name__}: {self}"]


def cell_notebook(code: str, folder: Path, name: str) -> Path:
    """Write the cell's code as a one-cell notebook `<name>.ipynb` (made unique) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(code))
    path = folder / f"{name}.ipynb"
    if path.exists():  # the same cell run again while its last job is still around
        path = folder / f"{name}-{hashlib.sha256(f'{code}{time.time()}'.encode()).hexdigest()[:6]}.ipynb"
    nbformat.write(nb, str(path))
    return path


def cell_job_name(session: str | None, execution_count: int | None) -> str:
    """`train.cell-7` for the 7th run cell of train.ipynb (`__session__` is the notebook's path)."""
    stem = Path(session).stem if session else "notebook"
    return f"{stem}.cell-{execution_count}" if execution_count else f"{stem}.cell"


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
            if cell is not None and "--no-raise" not in line.split():
                raise JobFailed(f"gpusched: {exc}") from None
            print(f"gpusched: {exc}", file=sys.stderr)
        except KeyboardInterrupt:
            print(
                "gpusched: interrupted (the job keeps its place; cancel it with %gpusched cancel ID)", file=sys.stderr
            )

    def _line(self, line: str) -> None:
        # the CLI's server commands; errors are reported in the cell instead of exiting
        argv = _split(line, "%gpusched")
        _check_command(argv)
        args = cli.build_parser("%gpusched", _Parser, self_parsing=False).parse_args(argv)
        cli.run(args, out=sys.stdout)

    def _cell(self, line: str, code: str) -> None:
        args = _cell_parser().parse_args(_split(line, "%%gpusched"))
        client = Client(args.url, args.token)
        shell = self.shell
        # while a cell runs, IPython's counter is already one past the cell's prompt number (In [7])
        name = cell_job_name(
            shell.user_ns.get("__session__") if shell else None, shell.execution_count - 1 if shell else None
        )
        path = cell_notebook(code, Path.cwd() / CELL_DIR, name)
        try:
            job = client.submit(str(path), **spec_from_args(args))
        except GPUSchedError:
            path.unlink(missing_ok=True)
            raise
        print(f"submitted {job['id']} ({job['gpus']} GPU, {job['priority']})", file=sys.stderr)
        if args.no_wait:
            return
        try:
            while job["state"] not in cli.TERMINAL:
                time.sleep(1.0)
                job = client.get(job["id"])
        finally:
            if job["state"] in cli.TERMINAL:
                path.unlink(missing_ok=True)
        try:
            show_outputs(client.output(job["id"]))
        except GPUSchedError:
            pass  # no executed notebook (e.g. cancelled before it ran)
        if job["state"] != "SUCCEEDED":
            why = f"gpusched: job {job['id']} {job['state']}: {job.get('message') or job.get('reason')}"
            if not args.no_raise:
                raise JobFailed(why)
            print(why, file=sys.stderr)


def load_ipython_extension(ipython) -> None:
    ipython.register_magics(GPUSchedMagics)
