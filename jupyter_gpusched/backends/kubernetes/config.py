"""The Kubernetes backend's settings, as one frozen snapshot that every thread of the backend reads.

Operators set them as traits of `KubernetesBackend` (`c.KubernetesBackend.namespace = "gpu"`); the backend
freezes them into a `KubernetesConfig` when it is built (`backend.cfg`). The fields without a trait (timeouts,
byte bounds) are for tests and benchmarks, which pass a `KubernetesConfig` directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..logcap import DEFAULT_MAX_LOG_BYTES

GPU_RESOURCE = "nvidia.com/gpu"
# KubernetesConfig fields whose KubernetesBackend trait has another name (`pools()` is a method there).
TRAIT_NAMES = {"pools": "allowed_pools"}


@dataclass(frozen=True)
class KubernetesConfig:
    """How the backend reaches the cluster and what its Jobs look like (see docs/kubernetes.md)."""

    kubeconfig: str = ""  # path; "" -> $KUBECONFIG or ~/.kube/config, or in-cluster when those are absent
    context: str = ""  # kubeconfig context; "" -> the current one
    in_cluster: bool = False  # use the pod's service account (the service runs inside the cluster)
    namespace: str = "default"
    tenant_namespaces: Mapping[str, str] = field(default_factory=dict)  # tenant -> namespace of its Jobs
    image: str = "quay.io/jupyter/scipy-notebook:latest"  # must contain papermill
    image_pull_policy: str = "IfNotPresent"
    command: tuple[str, ...] = ("papermill",)  # followed by input, output and parameter arguments
    pool_label: str = "gpusched.io/pool"  # node label whose value names the node's pool
    default_pool: str = "default"  # pool of GPU nodes without that label
    pools: tuple[str, ...] = ()  # only nodes of these pools are used; () -> every pool
    spot_pools: tuple[str, ...] = ()  # pools known to be spot (also: any pool whose nodes carry spot_taint)
    spot_taint: str = "gpusched.io/spot"  # taint key of spot nodes; Jobs placed there tolerate it
    gpu_product_label: str = "nvidia.com/gpu.product"  # GPU feature discovery's label: a pool's GPU type
    gpu_resource: str = GPU_RESOURCE
    gpu_taint: str = GPU_RESOURCE  # taint key of GPU nodes (NVIDIA's GPU operator, cloud GPU node pools): tolerated
    tolerations: tuple[Mapping[str, Any], ...] = ()  # more tolerations for every job pod
    instance: str = "default"  # label value that tells this service's Jobs from another's in the same namespace
    service_account: str = ""
    output_volume: Mapping[str, Any] | None = None  # a pod `volumes` entry (without name), e.g. a PVC
    container_resources: Mapping[str, Any] = field(default_factory=dict)  # extra requests/limits (cpu, memory)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    pod_labels: Mapping[str, str] = field(default_factory=dict)
    ttl_after_finished: int | None = 24 * 3600  # seconds finished Jobs are kept; None -> forever
    pin_nodes: bool = True  # pin each Job to the node the core chose (else: only to its pool)
    preempt_grace: float = 30.0  # seconds: the pod's terminationGracePeriodSeconds (SIGTERM, then SIGKILL)
    heartbeat_interval: float = 5.0  # seconds between heartbeats reported for running jobs
    workers: int = 4  # threads doing API writes
    watch_timeout: int = 300  # seconds a watch request stays open before it is renewed
    request_timeout: float = 10.0  # seconds for one API request
    max_backoff: float = 5.0  # seconds; the longest wait between retries of one job's API calls
    sync_timeout: float = 10.0  # seconds the constructor waits for the first list of nodes
    dry_run_on_submit: bool = True  # check each submission with a server-side dry run (2 API calls)
    copy_logs: bool = True  # copy each pod's container log into the job's log.txt (needs `pods/log` get)
    log_interval: float = 5.0  # seconds between log fetches of a running pod (and once more when it ends)
    log_workers: int = 4  # threads fetching pod logs side by side (one pod's log is fetched by one at a time)
    log_limit_bytes: int = 256 * 1024  # limitBytes of one fetch
    log_max_bytes: int = 64 * 1024 * 1024  # per pod: past this much, the copy stops with a note
    max_log_bytes: int = DEFAULT_MAX_LOG_BYTES  # the job's whole log.txt (all its pods): past it, the head goes
    upload_url: str = ""  # the service's URL as pods reach it: they upload their results there ("": off)
    upload_interval: float = 10.0  # seconds between uploads of a running notebook (when it changed)
    max_upload_bytes: int = 1 << 30  # a job's uploaded output folder, in all
    admission: str = "core"  # "core": our scheduler places Jobs; "kueue": an existing Kueue admits them (kueue.py)
    kueue_queues: Mapping[str, str] = field(default_factory=dict)  # tenant -> its LocalQueue; default: its name
    kueue_priority_classes: Mapping[str, str] = field(default_factory=dict)  # high/normal/low -> WorkloadPriorityClass

    def namespace_for(self, tenant: str) -> str:
        return self.tenant_namespaces.get(tenant, self.namespace)

    def namespaces(self) -> list[str]:
        return sorted({self.namespace, *self.tenant_namespaces.values()})


# The KubernetesConfig fields operators set as traits: field -> trait (the same name but for `pools`, which
# is the backend's method that reports the pools it found).
SETTINGS = {
    name: TRAIT_NAMES.get(name, name)
    for name in (
        "kubeconfig",
        "context",
        "in_cluster",
        "namespace",
        "tenant_namespaces",
        "image",
        "image_pull_policy",
        "pool_label",
        "default_pool",
        "pools",
        "spot_pools",
        "spot_taint",
        "gpu_resource",
        "gpu_taint",
        "tolerations",
        "instance",
        "service_account",
        "output_volume",
        "container_resources",
        "ttl_after_finished",
        "workers",
        "copy_logs",
        "log_interval",
        "log_workers",
        "max_log_bytes",
        "upload_url",
        "upload_interval",
        "max_upload_bytes",
        "preempt_grace",
        "admission",
        "kueue_queues",
        "kueue_priority_classes",
    )
}
