"""What a Node offers in GPUs: pure functions over a Node object (no I/O), read by `status`.

- **Pools** are the value of the admin's `pool_label` (`gpusched.io/pool`; `default_pool` without it).
- **GPU feature discovery** labels give a pool its facts: `nvidia.com/gpu.product` (the GPU type),
  `nvidia.com/gpu.memory` (MiB per GPU) and `nvidia.com/gpu.count` (GPUs per node: the size of a node the pool
  adds), each where all the pool's nodes agree.
- **MIG.** With the device plugin's *mixed* strategy a partitioned GPU is offered as `nvidia.com/mig-<profile>`
  resources (`nvidia.com/mig-1g.10gb: 7`), and `nvidia.com/gpu` counts only the GPUs left whole. Each MIG
  profile of a node becomes a node of its own for the core, named `<node>/<profile>`, in the pool
  `<pool>/<profile>` whose GPU type is the profile (`mig-1g.10gb`): a job asks for a slice with that
  `gpu_type`, and its pod requests that resource instead of `nvidia.com/gpu`. The resources of a mixed node are
  disjoint, so each counts once. (With the *single* strategy the slices are plain `nvidia.com/gpu` and GPU feature
  discovery names them in `gpu.product`, e.g. `NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`: a pool like any other.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .config import KubernetesConfig

MIG_PREFIX = "nvidia.com/mig-"
SEP = "/"  # core node `<node>/<profile>` and pool `<pool>/<profile>`: never part of a Node name or label value
GFD_MEMORY = "nvidia.com/gpu.memory"
GFD_COUNT = "nvidia.com/gpu.count"
_MIG_MEMORY = re.compile(r"\.(\d+)gb$")


@dataclass(frozen=True)
class GpuSlot:
    """One kind of GPU resource on one node, as the core sees it: a node of `gpus` in `pool`."""

    name: str  # the core's node name: the Node's, or `<node>/<profile>` for MIG slices
    node: str  # the Kubernetes Node
    pool: str  # the core's pool
    node_pool: str  # the Node's own pool (its `pool_label` value): what its Job's nodeSelector names
    resource: str  # the extended resource a pod requests here
    gpus: int
    spot: bool
    gpu_type: str | None = None
    memory_mib: int | None = None  # per GPU (per slice)
    count: int | None = None  # GPU feature discovery's GPUs per node (whole GPUs only)


def int_or_none(value: object) -> int | None:
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


def mig_profile(resource: str) -> str | None:
    """`nvidia.com/mig-1g.10gb` -> `mig-1g.10gb`; None for any other resource."""
    return (
        resource[len("nvidia.com/") :] if resource.startswith(MIG_PREFIX) and len(resource) > len(MIG_PREFIX) else None
    )


def resource_for(gpu_type: str | None, cfg: KubernetesConfig) -> str:
    """The resource a pod of this GPU type requests: the MIG resource for a `mig-*` type, else `gpu_resource`."""
    return f"nvidia.com/{gpu_type}" if gpu_type and gpu_type.startswith("mig-") else cfg.gpu_resource


def split_node(core_name: str) -> tuple[str, str | None]:
    """The core's node name -> (the Kubernetes Node, the MIG profile or None)."""
    node, _, profile = core_name.partition(SEP)
    return node, profile or None


def mig_memory_mib(profile: str, labels: Mapping[str, str]) -> int | None:
    """A slice's memory: GPU feature discovery's `nvidia.com/<profile>.memory` label, else the profile's name."""
    labelled = int_or_none(labels.get(f"nvidia.com/{profile}.memory"))
    if labelled is not None:
        return labelled
    m = _MIG_MEMORY.search(profile)
    return int(m.group(1)) * 1024 if m else None


def gpu_slots(node: Mapping, cfg: KubernetesConfig) -> list[GpuSlot]:
    """The GPU resources of a node the core may use (none for a node being deleted, cordoned, or of a pool
    not in `cfg.pools`)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    if meta.get("deletionTimestamp") or spec.get("unschedulable"):
        return []  # (a cordoned node is being drained: its jobs are moved, nothing new goes there)
    labels = meta.get("labels") or {}
    pool = labels.get(cfg.pool_label) or cfg.default_pool
    if cfg.pools and pool not in cfg.pools:
        return []
    spot = pool in cfg.spot_pools or any(t.get("key") == cfg.spot_taint for t in spec.get("taints") or ())
    name = meta.get("name", "")
    out = []
    for resource, value in sorted(((node.get("status") or {}).get("allocatable") or {}).items()):
        gpus = int_or_none(value) or 0
        if gpus <= 0:
            continue
        if resource == cfg.gpu_resource:
            product = labels.get(cfg.gpu_product_label)
            memory, count = int_or_none(labels.get(GFD_MEMORY)), int_or_none(labels.get(GFD_COUNT))
            out.append(GpuSlot(name, name, pool, pool, resource, gpus, spot, product, memory, count))
        elif (profile := mig_profile(resource)) is not None:
            core = f"{name}{SEP}{profile}"
            memory = mig_memory_mib(profile, labels)
            out.append(GpuSlot(core, name, f"{pool}{SEP}{profile}", pool, resource, gpus, spot, profile, memory))
    return out


def gpu_limits(job: Mapping) -> dict[str, str]:
    """The `nvidia.com/*` limits of a Job's containers (which GPU resource its pods take, and how many)."""
    containers = (((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or ()
    return {
        k: str(v)
        for c in containers
        for k, v in ((c.get("resources") or {}).get("limits") or {}).items()
        if k.startswith("nvidia.com/")
    }
