"""`jupyter gpusched kernelspec install`: a Python kernelspec whose kernels queue for GPUs.

The kernelspec names the `gpusched-provisioner` (server/provisioner.py) with the GPUs, priority
and tenant to ask for; installing the package already installs "Python 3 (1 GPU)" (python3-gpu1).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from jupyter_client.kernelspec import KernelSpecManager

from ..core.spec_fields import DEFAULT_PRIORITY, PRIORITY_CHOICES
from ..server.provisioner import kernel_spec


def install(
    gpus: int,
    priority: str = DEFAULT_PRIORITY,
    tenant: str | None = None,
    name: str | None = None,
    display_name: str = "",
    user: bool = False,
    prefix: str | None = None,
) -> str:
    """Install the kernelspec; return the folder it went to."""
    name = name or f"python3-gpu{gpus}"
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "kernel.json").write_text(json.dumps(kernel_spec(gpus, priority, tenant, display_name), indent=1))
        return KernelSpecManager().install_kernel_spec(tmp, name, user=user, prefix=prefix)


def kernelspec_main(argv: list[str], out: TextIO = sys.stdout) -> int:
    p = argparse.ArgumentParser(prog="jupyter gpusched kernelspec", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="action", required=True)
    i = sub.add_parser("install", help="install a kernelspec whose kernels wait for N GPUs from the scheduler")
    i.add_argument("--gpus", type=int, default=1, help="GPUs each kernel asks for (default: 1)")
    i.add_argument("--priority", default=DEFAULT_PRIORITY, choices=PRIORITY_CHOICES)
    i.add_argument("--tenant", help="tenant to charge (default: the user's)")
    i.add_argument("--name", help="kernelspec name (default: python3-gpuN)")
    i.add_argument("--display-name", default="", help='name in the launcher (default: "Python 3 (N GPUs)")')
    where = i.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for this user only")
    where.add_argument("--prefix", help="install under this prefix (e.g. sys.prefix)")
    args = p.parse_args(argv)
    if args.gpus < 1:
        p.error("--gpus must be at least 1")
    path = install(args.gpus, args.priority, args.tenant, args.name, args.display_name, args.user, args.prefix)
    print(f"installed {path}", file=out)
    return 0
