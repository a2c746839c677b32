"""Simulated GPU nodes for kwok (tests, the benchmark, developer clusters; deploy/kwok has its stages)."""

from __future__ import annotations

from typing import Any

from ..backends.kubernetes import KubernetesConfig


def fake_gpu_node(name: str, pool: str, gpus: int = 8, *, spot: bool = False, cfg: KubernetesConfig | None = None) -> dict[str, Any]:
    """A Node that kwok (annotation `kwok.x-k8s.io/node: fake`) keeps Ready with `gpus` nvidia.com/gpu."""
    cfg = cfg or KubernetesConfig()
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", cfg.gpu_resource: str(gpus)}
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {cfg.pool_label: pool, "kubernetes.io/hostname": name, "type": "kwok"},
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {},
        "status": {"allocatable": dict(resources), "capacity": dict(resources)},
    }
    if spot:
        node["spec"]["taints"] = [{"key": cfg.spot_taint, "value": "true", "effect": "NoSchedule"}]
    return node
