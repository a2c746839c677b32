"""Multi-node (gang) jobs: one Indexed `batch/v1` Job of N pods, a headless Service, and torchrun's environment.

A job the core placed on N nodes (it asked for more GPUs than one node has) runs as one Job with
`completionMode: Indexed` and `completions = parallelism = N`: pod i has `JOB_COMPLETION_INDEX` = i and the
stable hostname `<job>-i`, which the headless Service `<job>` (selecting the job's pods, ready or not) makes
resolvable as `<job>-i.<job>.<namespace>.svc`. Every pod gets what `torchrun` reads:

    MASTER_ADDR=<job>-0.<job>.<ns>.svc  MASTER_PORT=29500  WORLD_SIZE=N  RANK=i  NPROC_PER_NODE=<GPUs per node>
    (and NNODES=N, NODE_RANK=i, for `torchrun --nnodes $NNODES --node-rank $NODE_RANK ...`)

**Pinning without per-index templates.** One Job has one pod template, so index i cannot be given node i. The
admission patch instead allows exactly the N chosen nodes (node affinity: one `metadata.name` term per node) and
keeps the gang's pods on distinct hosts (required pod anti-affinity on the job's label, per hostname, set at
creation: unlike node affinity it cannot change while the Job is suspended): N pods,
N allowed nodes, one pod per node, so the gang lands on exactly the core's nodes. Which index gets which of
them does not matter (rank 0 is found through DNS). Nothing else has to be written to the cluster: no node
labels (the service only reads Nodes) and no scheduling gates to lift.

**All or nothing.** The core admits a gang only when all its nodes are free (whole nodes), and the Job is
unsuspended once, for all N pods together. The job counts as started when every pod runs on its node; if one
pod is evicted or its node is lost, the whole Job is suspended (every pod goes) and the job requeued once.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ...core.model import Allocation
from .config import KubernetesConfig
from .names import A_NODE, L_INSTANCE, L_JOB_ID, MANAGED_BY, MANAGER, label_value
from .nodefacts import mig_profile

MASTER_PORT = 29500  # torchrun's default rendezvous port
INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"  # set by the Job controller on Indexed pods
HOSTNAME_KEY = "kubernetes.io/hostname"


class GangError(ValueError):
    """The allocation cannot be run as one Indexed Job."""


def gpus_per_node(allocation: Allocation) -> int:
    """GPUs each pod of the gang takes: the same on every node, or GangError."""
    counts = {len(gpus) for _, gpus in allocation}
    if len(counts) != 1:
        raise GangError(
            f"placed as {' + '.join(str(len(g)) for _, g in allocation)} GPUs on {len(allocation)} nodes; a multi-node "
            "job runs one pod per node with the same GPUs each: ask for a multiple of the nodes' GPU count"
        )
    return counts.pop()


def make_gang(job: dict[str, Any], nodes: int, per_node: int, cfg: KubernetesConfig) -> dict[str, Any]:
    """Turn a one-pod Job manifest (from `build_manifests`) into the gang's Indexed Job, in place; returns the
    headless Service for its rendezvous."""
    meta = job["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    spec = job["spec"]
    spec.update({"completionMode": "Indexed", "completions": nodes, "parallelism": nodes})
    pod = spec["template"]["spec"]
    pod["subdomain"] = name
    pod["affinity"] = {"podAntiAffinity": one_pod_per_host(meta["labels"][L_JOB_ID])}
    container = pod["containers"][0]
    limits = container["resources"].setdefault("limits", {})
    # The GPU resource `build_manifests` chose: nvidia.com/gpu, or a MIG slice's.
    resource = next((k for k in limits if k == cfg.gpu_resource or mig_profile(k)), cfg.gpu_resource)
    limits[resource] = str(per_node)
    if resource in container["resources"].get("requests", {}):
        container["resources"]["requests"][resource] = str(per_node)
    rank = {"valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_ANNOTATION}']"}}}
    container["env"] = [
        *container.get("env", []),
        {"name": "MASTER_ADDR", "value": f"{name}-0.{name}.{namespace}.svc"},
        {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        {"name": "WORLD_SIZE", "value": str(nodes)},
        {"name": "NNODES", "value": str(nodes)},
        {"name": "RANK", **rank},
        {"name": "NODE_RANK", **rank},
        {"name": "NPROC_PER_NODE", "value": str(per_node)},
    ]
    for mount in container.get("volumeMounts", []):
        if mount.get("name") == "output" and cfg.output_volume:
            # On a shared volume each rank writes its own folder (one notebook file per rank).
            mount.pop("subPath", None)
            mount["subPathExpr"] = f"{name}/rank-$(RANK)"
    labels = meta["labels"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(meta["annotations"]),
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # rank 0 must resolve before any pod is ready
            "selector": {
                MANAGED_BY: MANAGER,
                L_INSTANCE: labels[L_INSTANCE],
                L_JOB_ID: labels[L_JOB_ID],
            },
            "ports": [{"name": "rendezvous", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
        },
    }


def gang_placement(patch: dict[str, Any], nodes: tuple[str, ...], job_id: str) -> dict[str, Any]:
    """The admission patch of a gang: its pods may run only on the chosen nodes, one per node."""
    patch = copy.deepcopy(patch)
    template = patch["spec"]["template"]
    template["metadata"]["annotations"][A_NODE] = ",".join(nodes)
    # One term per node (terms are ORed): a `metadata.name` field selector takes a single value.
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [n]}]} for n in nodes]
    template["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}},
        # Unchanged (it is set at creation: a suspended Job's pod anti-affinity cannot be changed), but named
        # so the merge patch keeps it.
        "podAntiAffinity": one_pod_per_host(label_value(job_id)),
    }
    return patch


def one_pod_per_host(job_label: str) -> dict[str, Any]:
    """Required pod anti-affinity: no two pods of the gang on one host."""
    term = {"labelSelector": {"matchLabels": {L_JOB_ID: job_label}}, "topologyKey": HOSTNAME_KEY}
    return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}


def rank_of(pod: Mapping[str, Any]) -> str:
    """A gang pod's rank ("" for a one-pod Job's pod)."""
    meta = pod.get("metadata") or {}
    return (meta.get("annotations") or {}).get(INDEX_ANNOTATION) or (meta.get("labels") or {}).get(INDEX_ANNOTATION, "")
