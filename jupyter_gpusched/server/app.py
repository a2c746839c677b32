"""The Jupyter server extension: configuration (`c.GPUSched.*`) and wiring."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, Int, List, Unicode, default, validate

from ..core import Pool, Tenant, policy_names
from ..core.health import HealthConfig
from ..service import Service, ServiceConfig
from ..store import default_url
from .routes import handlers
from .scaling import parse_scaling


class GPUSched(ExtensionApp):
    """Queue notebooks as GPU jobs, scheduled fairly on this machine or a cluster."""

    name = "jupyter_gpusched"
    load_other_extensions = True

    backend = Unicode(
        "local", config=True, help="Where jobs run: 'local' (this machine) or 'kubernetes' (batch/v1 Jobs; see k8s_*)."
    )
    policy = Unicode("dynamic", config=True, help=f"Scheduling policy: one of {', '.join(policy_names())}.")
    db_url = Unicode(
        "", config=True, help="SQLAlchemy URL of the job store. Default: SQLite in <data_dir>/gpusched.db."
    )
    data_dir = Unicode("", config=True, help="Folder for the store and job folders. Default: <jupyter data dir>/gpusched.")
    local_gpus = Int(
        4, config=True, help="Virtual GPUs the local backend offers when no NVIDIA GPU is found (NVML)."
    )
    tenants = Dict(
        config=True,
        help="Tenants and their terms: {name: {'quota': GPUs guaranteed, 'burst': extra GPUs it may borrow "
        "(omit for any idle GPU)}}. Unset: one tenant, default_tenant, owning every GPU.",
    )
    default_tenant = Unicode("default", config=True, help="Tenant of jobs that name none (and of users not in user_tenants).")
    user_tenants = Dict(config=True, help="{user name: tenant} for users whose jobs go to a tenant of their own.")
    scaling = Dict(
        config=True,
        help=(
            "Pool-size recommendations from the demand forecast (GET gpusched/api/scaling, and "
            "gpusched_pool_recommended_nodes in /gpusched/metrics): {'lead_minutes': 30, 'cooldown_minutes': 60, "
            "'headroom': 0.0, 'spot_share': 0.0, 'pools': {name: {'min_nodes', 'max_nodes', 'gpus_per_node'}}}. "
            "See docs/forecasting.md."
        ),
    )
    pools = Dict(
        config=True,
        help="Pool terms: {name: {'spot': bool, 'price_per_gpu_hour': float, 'gpu_type': str}}. The local backend's pool is 'local'.",
    )
    admin_users = List(
        Unicode(), config=True, help="Users who see every job. Empty: everyone who can reach the server (single-user)."
    )
    identity_usernames = Bool(
        False,
        config=True,
        help="Use the authenticated user's name as job owner (multi-user setups). Off: every job belongs to the server's owner.",
    )
    multi_user = Bool(
        False,
        config=True,
        help="Serve many users (the JupyterHub service; always on there): jobs belong to the authenticated user, "
        "admins are admin_users, admin_groups and the Hub's admins, Hub groups map to tenants (group_tenants), "
        "notebooks are read from user_root_template.",
    )
    group_tenants = Dict(
        config=True,
        help="Multi-user: {Hub group: tenant}. A user's jobs go to the tenant of their first group listed here "
        "(else user_tenants / default_tenant); they may submit only to the tenants of their groups.",
    )
    admin_groups = List(Unicode(), config=True, help="Multi-user: Hub groups whose members are admins.")
    user_root_template = Unicode(
        "~{username}",
        config=True,
        help="Multi-user: each user's notebook folder; {username} is replaced by the Hub user name. A submitted "
        "path is resolved inside it and may not leave it. Match it to the single-user servers' root "
        "(c.Spawner.notebook_dir, or the home directory).",
    )
    hub_service_url = Unicode(
        config=True,
        help="Single-user server under JupyterHub: URL of the jupyter-gpusched hub service "
        "(e.g. http://127.0.0.1:10101/services/gpusched/). When set, this server runs no scheduler of its own: "
        "it forwards /gpusched/api/* to the service as this server's user. Default: $GPUSCHED_HUB_SERVICE_URL.",
    )
    hub_api_token = Unicode(
        config=True,
        help="Token sent with forwarded requests (needs access:services!service=<name>). Default: $JUPYTERHUB_API_TOKEN.",
    )
    # --- kubernetes backend (docs/kubernetes.md) ---
    k8s_kubeconfig = Unicode("", config=True, help="Kubernetes: kubeconfig file. Empty: $KUBECONFIG or ~/.kube/config, else in-cluster.")
    k8s_context = Unicode("", config=True, help="Kubernetes: kubeconfig context. Empty: the current context.")
    k8s_in_cluster = Bool(False, config=True, help="Kubernetes: use the pod's service account (the service runs in the cluster).")
    k8s_namespace = Unicode("default", config=True, help="Kubernetes: namespace of the Jobs.")
    k8s_tenant_namespaces = Dict(config=True, help="Kubernetes: {tenant: namespace} for tenants whose Jobs go to a namespace of their own.")
    k8s_image = Unicode(
        "quay.io/jupyter/scipy-notebook:latest", config=True, help="Kubernetes: container image of the jobs (must have papermill)."
    )
    k8s_image_pull_policy = Unicode("IfNotPresent", config=True, help="Kubernetes: imagePullPolicy of the job container.")
    k8s_pool_label = Unicode("gpusched.io/pool", config=True, help="Kubernetes: node label whose value is the node's pool.")
    k8s_default_pool = Unicode("default", config=True, help="Kubernetes: pool of GPU nodes without the pool label.")
    k8s_pools = List(Unicode(), config=True, help="Kubernetes: use only nodes of these pools. Empty: every GPU node.")
    k8s_spot_taint = Unicode(
        "gpusched.io/spot", config=True, help="Kubernetes: taint key of spot nodes (their pools are spot; Jobs placed there tolerate it)."
    )
    k8s_gpu_resource = Unicode("nvidia.com/gpu", config=True, help="Kubernetes: extended resource name of a GPU.")
    k8s_instance = Unicode("default", config=True, help="Kubernetes: label value telling this service's Jobs from another's.")
    k8s_service_account = Unicode("", config=True, help="Kubernetes: service account of the job pods. Empty: the namespace default.")
    k8s_output_volume = Dict(
        config=True, help="Kubernetes: a pod volume (without name), e.g. {'persistentVolumeClaim': {'claimName': 'gpusched'}}, "
        "mounted at /gpusched/output with the Job's name as subPath. Empty: an emptyDir."
    )
    k8s_container_resources = Dict(config=True, help="Kubernetes: extra container resources, e.g. {'requests': {'cpu': '4', 'memory': '32Gi'}}.")
    k8s_ttl_after_finished = Int(86400, config=True, help="Kubernetes: seconds a finished Job is kept (-1: forever).")
    k8s_copy_logs = Bool(
        True, config=True, help="Kubernetes: copy each pod's container log into the job's log (needs RBAC pods/log get)."
    )
    k8s_log_interval = Float(5.0, config=True, help="Kubernetes: seconds between log fetches of a running pod.")
    k8s_workers = Int(4, config=True, help="Kubernetes: threads writing to the API server.")
    # --- Prometheus, for forecasts of GPU use from DCGM metrics (docs/forecasting.md) ---
    prometheus_url = Unicode(
        config=True,
        help="Base URL of a Prometheus server holding dcgm-exporter metrics (e.g. http://prometheus:9090), for "
        "GET forecast?series=gpu_busy. Empty: that series is off. Default: $GPUSCHED_PROMETHEUS_URL.",
    )
    prometheus_query = Unicode(
        "sum(max_over_time(DCGM_FI_DEV_GPU_UTIL[10m]) > bool 0)",
        config=True,
        help="PromQL for the GPUs busy, evaluated every 10 minutes; its series are summed. The default counts each "
        "GPU that did any work in the 10 minutes before (DCGM_FI_DEV_GPU_UTIL is in dcgm-exporter's default "
        "counters on every GPU model; max_over_time keeps a GPU that paused between scrapes; '> bool 0' makes an "
        "idle GPU 0, so an idle cluster reads 0 rather than no data).",
    )
    prometheus_tenant_query = Unicode(
        "",
        config=True,
        help="PromQL for one tenant's busy GPUs, with {tenant} replaced by the tenant's name (escaped as a PromQL "
        "string, so put it inside double quotes), e.g. "
        "'sum(max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace=\"{tenant}\"}[10m]) > bool 0)'. "
        "Empty: no per-tenant gpu_busy forecasts.",
    )
    aging_interval = Float(3600.0, config=True, help="Seconds of waiting that raise a job one priority class (no starvation).")
    tick_interval = Float(0.5, config=True, help="Seconds between scheduling passes.")
    heartbeat_timeout = Float(60.0, config=True, help="A running job whose runner is silent this long is lost and retried.")

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return str(Path(jupyter_data_dir()) / "gpusched")

    @default("hub_service_url")
    def _default_hub_service_url(self) -> str:
        return os.environ.get("GPUSCHED_HUB_SERVICE_URL", "")

    @default("hub_api_token")
    def _default_hub_api_token(self) -> str:
        return os.environ.get("JUPYTERHUB_API_TOKEN", "")

    @property
    def is_multi_user(self) -> bool:
        return self.multi_user or bool(getattr(self.serverapp, "gpusched_hub_service", False))

    @property
    def forwards(self) -> bool:
        """A single-user server under a hub with the service configured: forward, run no core."""
        return bool(self.hub_service_url) and not self.is_multi_user

    @default("prometheus_url")
    def _default_prometheus_url(self) -> str:
        return os.environ.get("GPUSCHED_PROMETHEUS_URL", "")

    @validate("prometheus_tenant_query")
    def _check_prometheus_tenant_query(self, proposal):
        if proposal["value"] and "{tenant}" not in proposal["value"]:
            raise ValueError(f"c.GPUSched.prometheus_tenant_query must contain {{tenant}}: {proposal['value']!r}")
        return proposal["value"]

    @validate("policy")
    def _check_policy(self, proposal):
        if proposal["value"] not in policy_names():
            raise ValueError(f"c.GPUSched.policy must be one of {', '.join(policy_names())}, not {proposal['value']!r}")
        return proposal["value"]

    @validate("backend")
    def _check_backend(self, proposal):
        if proposal["value"] not in ("local", "kubernetes"):
            raise ValueError(f"c.GPUSched.backend must be 'local' or 'kubernetes', not {proposal['value']!r}")
        return proposal["value"]

    def _tenants(self) -> tuple[Tenant, ...]:
        out = []
        for name, terms in sorted(self.tenants.items()):
            terms = terms or {}
            out.append(Tenant(name, int(terms.get("quota", 0)), None if terms.get("burst") is None else int(terms["burst"])))
        return tuple(out)

    def _pools(self) -> tuple[Pool, ...]:
        return tuple(
            Pool(
                name,
                spot=bool(t.get("spot", False)),
                price_per_gpu_hour=float(t.get("price_per_gpu_hour", 0.0)),
                gpu_type=t.get("gpu_type"),
            )
            for name, t in sorted(self.pools.items())
        )

    def kubernetes_config(self):
        from ..backends.kubernetes import KubernetesConfig

        return KubernetesConfig(
            kubeconfig=self.k8s_kubeconfig,
            context=self.k8s_context,
            in_cluster=self.k8s_in_cluster,
            namespace=self.k8s_namespace,
            tenant_namespaces=dict(self.k8s_tenant_namespaces),
            image=self.k8s_image,
            image_pull_policy=self.k8s_image_pull_policy,
            pool_label=self.k8s_pool_label,
            default_pool=self.k8s_default_pool,
            pools=tuple(self.k8s_pools),
            spot_pools=tuple(name for name, t in self.pools.items() if (t or {}).get("spot")),
            spot_taint=self.k8s_spot_taint,
            gpu_resource=self.k8s_gpu_resource,
            instance=self.k8s_instance,
            service_account=self.k8s_service_account,
            output_volume=dict(self.k8s_output_volume) or None,
            container_resources=dict(self.k8s_container_resources),
            ttl_after_finished=None if self.k8s_ttl_after_finished < 0 else self.k8s_ttl_after_finished,
            workers=self.k8s_workers,
            copy_logs=self.k8s_copy_logs,
            log_interval=self.k8s_log_interval,
        )

    def make_backend(self):
        if self.backend == "kubernetes":
            from ..backends.kubernetes import KubernetesBackend

            return KubernetesBackend(self.kubernetes_config())
        from ..backends.local import LocalBackend

        return LocalBackend(virtual_gpus=self.local_gpus)

    def initialize_settings(self) -> None:
        self.service = None
        if self.forwards:
            from ..hub.forward import CallerStatus, Forwarder

            forwarder = Forwarder(self.hub_service_url, self.hub_api_token)
            self.settings.update(gpusched_forward=forwarder, gpusched_forward_caller=CallerStatus(forwarder))
            self.log.info("jupyter-gpusched: forwarding to the hub service at %s", self.hub_service_url)
            return
        if self.is_multi_user:
            known = set(self.tenants) | {self.default_tenant}
            unknown = sorted(set(self.group_tenants.values()) - known)
            if unknown:
                raise ValueError(f"c.GPUSched.group_tenants names tenants not in c.GPUSched.tenants: {', '.join(unknown)}")
            try:
                self.user_root_template.format(username="someone")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"c.GPUSched.user_root_template {self.user_root_template!r} may use only {{username}}: {exc!r}"
                ) from None
        data_dir = Path(self.data_dir).expanduser()
        backend = self.make_backend()
        if self.is_multi_user:  # a job runs the notebook checked at submission, or none
            from ..hub.contain import ContainedBackend

            backend = ContainedBackend(backend)
        pools = self._pools()
        configured = {p.name for p in pools}
        # A cluster backend reports the pools it finds (spot where its nodes carry the spot taint).
        pools += tuple(p for p in getattr(backend, "pools", list)() if p.name not in configured)
        config = ServiceConfig(
            db_url=self.db_url or default_url(data_dir),
            data_dir=data_dir,
            root_dir=Path(self.serverapp.root_dir),
            policy=self.policy,
            tenants=self._tenants(),
            default_tenant=self.default_tenant,
            user_tenants=dict(self.user_tenants),
            pools=pools,
            aging_interval=self.aging_interval,
            tick_interval=self.tick_interval,
            health=HealthConfig(heartbeat_timeout=self.heartbeat_timeout),
        )
        self.service = Service(config, backend)
        self.settings.update(
            gpusched_service=self.service,
            gpusched_admin_users=set(self.admin_users),
            gpusched_identity_usernames=self.identity_usernames,
            gpusched_owner=getpass.getuser(),
            gpusched_multi_user=self.is_multi_user,
            gpusched_group_tenants=dict(self.group_tenants),
            gpusched_admin_groups=set(self.admin_groups),
            gpusched_user_root=self.user_root_template,
            gpusched_prometheus_url=self.prometheus_url,
            gpusched_prometheus_query=self.prometheus_query,
            gpusched_prometheus_tenant_query=self.prometheus_tenant_query,
            gpusched_scaling=parse_scaling(self.scaling),
        )
        self.log.info(
            "jupyter-gpusched: %s policy, %s backend, %d GPUs, store %s",
            self.policy,
            self.backend,
            self.service.scheduler.cluster.total_gpus,
            config.db_url,
        )

    def initialize_handlers(self) -> None:
        # ExtensionApp prepends the server's base_url
        if self.forwards:
            from ..hub.forward import forward_handlers

            self.handlers.extend(forward_handlers("/"))
            return
        if self.is_multi_user:
            from ..hub.pages import page_handlers

            self.handlers.extend(page_handlers("/"))
        self.handlers.extend(handlers("/"))

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        if self.service is not None:
            self.service.start()
        if "gpusched_forward_caller" in self.settings:
            self.settings["gpusched_forward_caller"].start()

    async def stop_extension(self) -> None:
        if self.service is not None:
            await self.service.stop()
        if "gpusched_forward_caller" in self.settings:
            self.settings["gpusched_forward_caller"].stop()
