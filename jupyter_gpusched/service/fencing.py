"""GPUs that hold memory with no job on them are kept out of placement until they are clean."""

from __future__ import annotations

import logging

from ..core import Scheduler
from ..core.health import HealthConfig, leaked_gpus

log = logging.getLogger("jupyter_gpusched")


def fence_leaky_gpus(scheduler: Scheduler, used: dict[tuple[str, int], float], health: HealthConfig) -> None:
    """Fence each GPU that `used` (the backend's MiB per (node, GPU)) shows leaking; lift the fence of each
    one that is clean again."""
    cluster = scheduler.cluster
    if not used and not any(cluster.fenced_on(n) for n in cluster.node_names):
        return  # nothing reported and nothing fenced
    allocated = [(node, g) for job in scheduler.active.values() for node, ids in job.allocation for g in ids]
    leaky = set(leaked_gpus(used, allocated, health))
    for node in cluster.node_names:
        for gpu in cluster.fenced_on(node):
            if (node, gpu) not in leaky:
                cluster.unfence(node, gpu)
                log.info("GPU %s:%d is clean again", node, gpu)
    for node, gpu in sorted(leaky):
        if node in cluster and gpu not in cluster.fenced_on(node):
            cluster.fence(node, gpu)
            log.warning(
                "GPU %s:%d holds %.0f MiB with no job on it: fenced until it is clean", node, gpu, used[(node, gpu)]
            )
