"""The Kubernetes backend: each job is a `batch/v1` Job, created suspended, that the core admits.

One concern per module: `config` (settings), `names` (RFC 1123 names, labels), `manifests` (Job, ConfigMap,
admission patch), `api` (client, `KubeApiError`), `watch` (list + watch caches), `status` (what the caches
mean), `reconcile` (the workers; the start-up reconcile), `podlogs` (pod logs -> log.txt), `state` (what the
threads share), and `backend` (`KubernetesBackend`, wiring them into the Backend protocol).
"""

from .api import USER_AGENT, Api, KubeApiError
from .backend import KubernetesBackend
from .config import GPU_RESOURCE, KubernetesConfig
from .manifests import INPUT_DIR, OUTPUT_DIR, build_manifests, manifest_yaml, placement_patch
from .names import A_ATTEMPT, A_JOB_ID, L_JOB_ID, MANAGED_BY, MANAGER, job_name, label_value
from .podlogs import split_log_lines

__all__ = [
    "A_ATTEMPT",
    "A_JOB_ID",
    "GPU_RESOURCE",
    "INPUT_DIR",
    "L_JOB_ID",
    "MANAGED_BY",
    "MANAGER",
    "OUTPUT_DIR",
    "Api",
    "USER_AGENT",
    "KubeApiError",
    "KubernetesBackend",
    "KubernetesConfig",
    "build_manifests",
    "job_name",
    "label_value",
    "manifest_yaml",
    "placement_patch",
    "split_log_lines",
]
