"""The Job and ConfigMap of a job, and the admission patch: plain dicts, no I/O (what `manifest` prints).

- **Pod.** One container running the configured image with `python /gpusched/input/gpusched_entry.py papermill
  /gpusched/input/notebook.ipynb /gpusched/output/output.ipynb -f /gpusched/input/parameters.json` (the entry,
  `pod_entry.py`, passes the pod's SIGTERM on to the kernel, so the checkpoint helper saves in the grace period),
  `nvidia.com/gpu` (or the MIG slice's `nvidia.com/mig-<profile>`) in limits, `restartPolicy: Never`,
  `activeDeadlineSeconds` = the job's `max_runtime`.
- **No retries by the Job controller.** `backoffLimit: 0`: the service, not the Job controller, decides
  whether a job runs again (`max_retries` counts re-runs after a job was lost, the same on every backend; a
  notebook that raises fails at once). A pod failure policy ignores disruptions, so a pod evicted or lost
  with its node does not fail the Job: the backend reports the job preempted and it resumes elsewhere.
- **Notebook delivery.** The notebook and its parameters go in a ConfigMap (`notebook.ipynb`,
  `parameters.json`) owned by the Job, mounted read-only at `/gpusched/input`; so a notebook (with its outputs)
  must be under 1 MiB, which the API server itself enforces. `/gpusched/output` is an emptyDir unless
  `output_volume` names a volume (e.g. a PVC), mounted with the Job's name as subPath; notebooks that checkpoint
  write to `$GPUSCHED_CHECKPOINT_DIR` there and resume from it.
- **Admission** is one merge patch: node selector for the pool, node affinity to the node the core chose,
  tolerations (the GPU taint, the admin's, a spot node's taint), and `suspend: false`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...core.model import JobSpec, Priority
from ..preemption import grace_for
from .config import KubernetesConfig
from .kueue import make_kueue_job
from .names import (
    A_ATTEMPT,
    A_JOB_ID,
    A_NODE,
    A_NOTEBOOK,
    A_OWNER,
    A_TENANT,
    L_INSTANCE,
    L_JOB_ID,
    L_NOTEBOOK,
    L_PRIORITY,
    L_TENANT,
    MANAGED_BY,
    MANAGER,
    job_name,
    label_value,
)
from .nodefacts import resource_for

CONFIGMAP_LIMIT = 1024 * 1024  # bytes: what etcd / the API server accept in one ConfigMap
INPUT_DIR = "/gpusched/input"
OUTPUT_DIR = "/gpusched/output"
ENTRY_SCRIPT = "gpusched_entry.py"  # pod_entry.py, in the ConfigMap: the container's first process
ENTRY = ("python", f"{INPUT_DIR}/{ENTRY_SCRIPT}")


def wrap_notebook_command(container: dict[str, Any], *wrapper: str) -> None:
    """Run the notebook command under `wrapper` (in place), below the entry, which must stay the first process."""
    command = list(container["command"])
    head = len(ENTRY) if tuple(command[: len(ENTRY)]) == ENTRY else 0
    container["command"] = [*command[:head], *wrapper, *command[head:]]


def build_manifests(
    job_id: str,
    spec: JobSpec,
    notebook_text: str,
    parameters: Mapping[str, Any],
    cfg: KubernetesConfig,
    *,
    kernel_name: str | None = None,
    gpu_resource: str | None = None,
    checkpoint_interval: float | None = None,
    preempt_grace: float | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The suspended Job and its ConfigMap for one job, as plain dicts (what `manifest` prints)."""
    name = job_name(job_id)
    namespace = cfg.namespace_for(spec.tenant)
    notebook_label = label_value(Path(spec.notebook).stem or "notebook")
    labels = {
        MANAGED_BY: MANAGER,
        L_INSTANCE: label_value(cfg.instance),
        L_JOB_ID: label_value(job_id),
        L_TENANT: label_value(spec.tenant),
        L_PRIORITY: Priority.parse(spec.priority).label,
        L_NOTEBOOK: notebook_label,
    }
    annotations = {A_JOB_ID: job_id, A_NOTEBOOK: spec.notebook, A_OWNER: spec.owner, A_TENANT: spec.tenant}
    command = [
        *ENTRY,
        *cfg.command,
        f"{INPUT_DIR}/notebook.ipynb",
        f"{OUTPUT_DIR}/output.ipynb",
        "-f",
        f"{INPUT_DIR}/parameters.json",
        "--log-output",
        "--no-progress-bar",
    ]
    if kernel_name:
        command += ["-k", kernel_name]
    # A `mig-*` GPU type asks for that MIG slice; `launch` sets the resource of the node the core chose.
    limits: dict[str, Any] = {gpu_resource or resource_for(spec.gpu_type, cfg): str(int(spec.gpus))}
    resources: dict[str, Any] = {"limits": limits}
    for key, value in (cfg.container_resources or {}).items():
        if key in ("limits", "requests") and isinstance(value, Mapping):
            resources.setdefault(key, {}).update({k: str(v) for k, v in value.items()})
    output_volume = dict(cfg.output_volume) if cfg.output_volume else {"emptyDir": {}}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "notebook",
                "image": cfg.image,
                "imagePullPolicy": cfg.image_pull_policy,
                "command": command,
                "workingDir": OUTPUT_DIR,
                "env": [
                    {"name": "GPUSCHED_JOB_ID", "value": job_id},
                    {"name": "GPUSCHED_CHECKPOINT_DIR", "value": f"{OUTPUT_DIR}/checkpoints"},
                    {
                        "name": "GPUSCHED_ATTEMPT",
                        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{A_ATTEMPT}']"}},
                    },
                    {"name": "PYTHONUNBUFFERED", "value": "1"},
                    {"name": "GPUSCHED_CHECKPOINT_REPORT", "value": "log"},  # each save: a line in the pod log
                ],
                "resources": resources,
                "volumeMounts": [
                    {"name": "input", "mountPath": INPUT_DIR, "readOnly": True},
                    {"name": "output", "mountPath": OUTPUT_DIR, "subPath": name},
                ],
            }
        ],
        "volumes": [{"name": "input", "configMap": {"name": name}}, {"name": "output", **output_volume}],
        "tolerations": tolerations(cfg, spot=False),
        # A deleted (preempted) pod gets SIGTERM, then this long to save a checkpoint before SIGKILL.
        # Its pool's grace when c.GPUSched.pools sets one (the pool is known: the Job is built at admission).
        "terminationGracePeriodSeconds": max(0, int(math.ceil(grace_for(preempt_grace, cfg.preempt_grace)))),
    }
    if cfg.service_account:
        pod_spec["serviceAccountName"] = cfg.service_account
    job_spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 0,  # re-runs are the service's decision (max_retries), never the Job controller's
        "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
        "template": {
            "metadata": {
                "labels": {**dict(cfg.pod_labels), **labels},
                "annotations": {**dict(cfg.pod_annotations), **annotations, A_ATTEMPT: "0"},
            },
            "spec": pod_spec,
        },
    }
    if checkpoint_interval is not None and checkpoint_interval > 0:  # the policy's (spot pools): checkpoint.every()
        env = pod_spec["containers"][0]["env"]
        env.append({"name": "GPUSCHED_CHECKPOINT_INTERVAL", "value": repr(float(checkpoint_interval))})
    if spec.max_runtime is not None:
        job_spec["activeDeadlineSeconds"] = max(1, min(int(math.ceil(spec.max_runtime)), 2**53))
    if cfg.ttl_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = int(cfg.ttl_after_finished)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": job_spec,
    }
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "annotations": {A_JOB_ID: job_id}},
        "data": {
            "notebook.ipynb": notebook_text,
            "parameters.json": json.dumps(dict(parameters), sort_keys=True),
            ENTRY_SCRIPT: (Path(__file__).parent / "pod_entry.py").read_text(encoding="utf-8"),
        },
    }
    if cfg.admission == "kueue":
        make_kueue_job(job, spec, cfg)
    return job, configmap


def placement_patch(
    node: str | None, pool: str | None, spot: bool, attempt: int, cfg: KubernetesConfig
) -> dict[str, Any]:
    """The admission patch: where the pod may run, and `suspend: false` (JSON merge patch)."""
    spec: dict[str, Any] = {
        "nodeSelector": {cfg.pool_label: pool} if pool is not None and pool != cfg.default_pool else None,
        "affinity": None,
        "tolerations": tolerations(cfg, spot),
    }
    if pool == cfg.default_pool and pool is not None:
        # Nodes without the pool label: keep them off labelled pools' nodes.
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": cfg.pool_label, "operator": "DoesNotExist"}]}]
                }
            }
        }
    if node and cfg.pin_nodes:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    return {
        "spec": {
            "suspend": False,
            "template": {"metadata": {"annotations": {A_ATTEMPT: str(attempt), A_NODE: node or ""}}, "spec": spec},
        }
    }


def tolerations(cfg: KubernetesConfig, spot: bool) -> list[dict[str, Any]]:
    """Every job pod tolerates the GPU nodes' taint and the admin's extra tolerations; one placed on a spot
    node also the spot taint. (A merge patch replaces the whole list, so the admission patch carries it all.)"""
    out = [{"key": cfg.gpu_taint, "operator": "Exists", "effect": "NoSchedule"}] if cfg.gpu_taint else []
    out += [dict(t) for t in cfg.tolerations]
    if spot:
        out.append({"key": cfg.spot_taint, "operator": "Exists"})
    return out


def manifest_yaml(docs: list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=120)
