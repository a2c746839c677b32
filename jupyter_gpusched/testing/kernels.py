"""Real kernel specs whose start misbehaves: an ipykernel that starts late, dies at first, or never answers.

`install_kernel(folder, name, delay=2.0)` writes `folder/kernels/<name>/kernel.json`; with `folder` on
`JUPYTER_PATH` (set it in the environment the backend launches runners with) a notebook whose kernelspec is
`name` gets it. The kernel is this module run as a program: it sleeps `delay` seconds, exits with status 1
on its first `die_first` starts (counted in a file beside the spec), or sleeps for ever (`hang`), and
otherwise becomes a plain ipykernel.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import nbformat

from .notebooks import new_notebook


def install_kernel(folder: Path, name: str, *, delay: float = 0.0, die_first: int = 0, hang: bool = False) -> Path:
    """Write the kernel spec `name` under `folder/kernels/`; returns its folder."""
    spec_dir = Path(folder) / "kernels" / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", __name__, "--delay", repr(float(delay))]
    if die_first:
        argv += ["--die-first", str(die_first), "--count-file", str(spec_dir / "starts")]
    if hang:
        argv.append("--hang")
    spec = {"argv": [*argv, "-f", "{connection_file}"], "display_name": name, "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return spec_dir


def starts(spec_dir: Path) -> int:
    """How many times a `die_first` kernel was started."""
    try:
        return (Path(spec_dir) / "starts").stat().st_size
    except OSError:
        return 0


def kernel_notebook(path: Path, kernel: str, *cells: str) -> Path:
    """A notebook with these code cells whose kernelspec is `kernel`."""
    nb = new_notebook(*cells)
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--die-first", type=int, default=0)
    p.add_argument("--count-file", type=Path, default=None)
    p.add_argument("--hang", action="store_true")
    args, rest = p.parse_known_args(argv)
    if args.count_file is not None:
        fd = os.open(args.count_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(fd, b".")  # one byte per start: the size is the count
        os.close(fd)
        if args.count_file.stat().st_size <= args.die_first:
            print("slow kernel: dying before kernel_info, as asked", file=sys.stderr, flush=True)
            sys.exit(1)
    time.sleep(args.delay)
    while args.hang:
        time.sleep(3600)
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance(argv=rest)


if __name__ == "__main__":
    main()
