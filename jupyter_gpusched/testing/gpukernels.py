"""GPU kernels under test: the provisioner's entry point, the GPU kernelspecs, a kernel's real environment."""

from __future__ import annotations

import sys
from importlib.metadata import entry_points
from pathlib import Path

from ..server.provisioner import PROVISIONER_NAME, GPUKernelProvisioner

GROUP = "jupyter_client.kernel_provisioners"


def ensure_provisioner_entry_point(folder: Path) -> Path | None:
    """Make `gpusched-provisioner` findable as an install of this checkout declares it (pyproject.toml). A
    venv holding an older install of the package lacks the entry point: declare it in a dist-info in
    `folder`, put on sys.path (jupyter_client looks entry points up when a kernelspec names one).
    `folder` is returned when it was needed (put it on a server process's PYTHONPATH too), else None."""
    if any(ep.name == PROVISIONER_NAME for ep in entry_points(group=GROUP)):
        return None
    info = Path(folder) / "gpusched_kernels_under_test-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpusched-kernels-under-test\nVersion: 0\n")
    target = f"{GPUKernelProvisioner.__module__}:{GPUKernelProvisioner.__name__}"
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{PROVISIONER_NAME} = {target}\n")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return Path(folder)


def process_env(pid: int) -> dict[str, str]:
    """The environment a live process was started with (Linux /proc)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode("utf-8", "replace").split("\0") if "=" in item)
