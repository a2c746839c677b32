"""The Jupyter server extension: configuration (`c.GPUSched.*`) and wiring.

Where jobs run is a `Backend` class (`c.GPUSched.backend_class`, or the `backend` shortcut),
built as a traitlets Configurable that reads its own section (`c.LocalBackend.*`,
`c.KubernetesBackend.*`). The scheduler's settings go into one `ServiceConfig`; what the
handlers need goes into one `GPUSchedSettings` (settings.py). JupyterHub's modes (the hub
service, a user's server forwarding to it) extend this class in `hub/extension.py`.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any, cast

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, Int, List, Type, Unicode, default, validate
from traitlets.config import Config
from traitlets.utils.importstring import import_item

from ..backends.base import Backend
from ..backends.kubernetes.config import TRAIT_NAMES as K8S_TRAIT_NAMES
from ..backends.logcap import DEFAULT_MAX_LOG_BYTES
from ..core import OVERSIZE_GRANT_AFTER_S, Pool, SchedulerConfig, Tenant, policy_names
from ..core.budget import tenant_budgets
from ..core.health import HealthConfig
from ..core.idle import IdlePolicy
from ..service import Service, ServiceConfig
from ..service.advisor import parse_scaling
from ..service.notify import NotifySettings, SmtpSettings
from ..service.notify_targets import parse_targets
from ..service.prometheus import DEFAULT_QUERY, PrometheusSource
from ..service.stalls import DEFAULT_GPU_SELECTOR, StallSettings
from ..service.stalls import POLICIES as STALL_POLICIES
from ..store import default_url
from .routes import answer_long_request_lines, handlers
from .settings import SETTINGS_KEY, GPUSchedSettings

# c.GPUSched.backend names these classes
BACKEND_SHORTCUTS = {
    "local": "jupyter_gpusched.backends.local.LocalBackend",
    "kubernetes": "jupyter_gpusched.backends.kubernetes.KubernetesBackend",
}
# c.GPUSched.k8s_<name> -> c.KubernetesBackend.<name>, kept for one release
DEPRECATED_K8S = (
    "kubeconfig", "context", "in_cluster", "namespace", "tenant_namespaces", "image", "image_pull_policy",
    "pool_label", "default_pool", "pools", "spot_taint", "gpu_resource", "instance", "service_account",
    "output_volume", "container_resources", "ttl_after_finished", "copy_logs", "log_interval", "workers",
)  # fmt: skip


def _deprecated(name: str) -> str:
    return (
        f"Deprecated: use c.KubernetesBackend.{K8S_TRAIT_NAMES.get(name, name)} (this name goes in the next release)."
    )


class GPUSched(ExtensionApp):
    """Queue notebooks as GPU jobs, scheduled fairly on this machine or a cluster."""

    name = "jupyter_gpusched"
    load_other_extensions = True

    backend_class = Type(
        default_value=None,
        klass="jupyter_gpusched.backends.base.Backend",
        allow_none=True,
        config=True,
        help="Where jobs run: a Backend subclass (a traitlets Configurable: its settings are c.<ClassName>.*). "
        "Unset: the class the `backend` shortcut names.",
    )
    backend = Unicode(
        "local",
        config=True,
        help="Shortcut for backend_class: 'local' (LocalBackend: this machine; c.LocalBackend.*) or 'kubernetes' "
        "(KubernetesBackend: batch/v1 Jobs; c.KubernetesBackend.*, see docs/kubernetes.md).",
    )
    policy = Unicode("dynamic", config=True, help=f"Scheduling policy: one of {', '.join(policy_names())}.")
    db_url = Unicode(
        "", config=True, help="SQLAlchemy URL of the job store. Default: SQLite in <data_dir>/gpusched.db."
    )
    data_dir = Unicode(
        "", config=True, help="Folder for the store and job folders. Default: <jupyter data dir>/gpusched."
    )
    local_gpus = Int(
        4,
        config=True,
        help="Virtual GPUs the local backend offers when no NVIDIA GPU is found (NVML). Shortcut for "
        "c.LocalBackend.virtual_gpus, which wins when set.",
    )
    max_log_bytes = Int(
        DEFAULT_MAX_LOG_BYTES,
        config=True,
        help="Cap of a job's log on disk in bytes (past it the head is dropped and the log says so; 0: no cap). "
        "Shortcut for c.LocalBackend.max_log_bytes and c.KubernetesBackend.max_log_bytes, which win when set.",
    )
    tenants = Dict(
        config=True,
        help="Tenants and their terms: {name: {'quota': GPUs guaranteed, 'burst': extra GPUs it may borrow "
        "(omit for any idle GPU), 'budget': {'gpu_hours' or 'money': amount, 'period': 'day|week|month', "
        "'reset_day': 1, 'timezone': 'UTC', 'enforce': 'soft|hard'} (optional; docs/budgets.md)}}. "
        "Unset: one tenant, default_tenant, owning every GPU.",
    )
    interactive_share = Float(
        None,
        allow_none=True,
        config=True,
        help="Default cap on the share of a tenant's quota its interactive GPU kernels may hold (0-1; a tenant's "
        "own 'interactive_share' in c.GPUSched.tenants wins). None: kernels may use the whole quota.",
    )
    interactive_idle_timeout = Float(
        3600.0,
        config=True,
        help="Seconds a GPU kernel may hold its GPUs running nothing while others wait, before it is warned "
        "(then shut down interactive_idle_warning seconds later unless it runs something or the user keeps it). "
        "0: never reclaim (docs/interactive.md).",
    )
    interactive_idle_warning = Float(600.0, config=True, help="Seconds between the idle warning and the reclaim.")
    interactive_keep_max = Float(
        8 * 3600.0, config=True, help="Seconds the 'Keep' action may add to one GPU kernel's idle clock in all."
    )
    interactive_reclaim_only_when_waiting = Bool(
        True, config=True, help="Reclaim idle GPU kernels only while someone waits for GPUs."
    )
    default_tenant = Unicode(
        "default", config=True, help="Tenant of jobs that name none (and of users not in user_tenants)."
    )
    user_tenants = Dict(config=True, help="{user name: tenant} for users whose jobs go to a tenant of their own.")
    scaling = Dict(
        config=True,
        help=(
            "Pool-size recommendations from the demand forecast (GET gpusched/api/scaling, and "
            "gpusched_pool_recommended_nodes in /gpusched/metrics): {'lead_minutes': 30, 'cooldown_minutes': 60, "
            "'headroom': 0.0, 'spot_share': 0.0 (or 'auto': the preemptible jobs' share of the GPU-hours asked for "
            "over the last week), 'pools': {name: {'min_nodes', 'max_nodes', 'gpus_per_node'}}}. "
            "See docs/forecasting.md."
        ),
    )
    pools = Dict(
        config=True,
        help="Pool terms: {name: {'spot': bool, 'price_per_gpu_hour': float, 'gpu_type': str, 'preempt_grace': "
        "seconds}}; preempt_grace overrides the backend's for jobs preempted on that pool. The local backend's "
        "pool is 'local'. The Kubernetes backend treats the spot ones as spot unless c.KubernetesBackend.spot_pools is set.",
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
    # --- deprecated: the Kubernetes backend's own settings are c.KubernetesBackend.* (docs/kubernetes.md) ---
    k8s_kubeconfig = Unicode("", config=True, help=_deprecated("kubeconfig"))
    k8s_context = Unicode("", config=True, help=_deprecated("context"))
    k8s_in_cluster = Bool(False, config=True, help=_deprecated("in_cluster"))
    k8s_namespace = Unicode("default", config=True, help=_deprecated("namespace"))
    k8s_tenant_namespaces = Dict(config=True, help=_deprecated("tenant_namespaces"))
    k8s_image = Unicode("quay.io/jupyter/scipy-notebook:latest", config=True, help=_deprecated("image"))
    k8s_image_pull_policy = Unicode("IfNotPresent", config=True, help=_deprecated("image_pull_policy"))
    k8s_pool_label = Unicode("gpusched.io/pool", config=True, help=_deprecated("pool_label"))
    k8s_default_pool = Unicode("default", config=True, help=_deprecated("default_pool"))
    k8s_pools = List(Unicode(), config=True, help=_deprecated("pools"))
    k8s_spot_taint = Unicode("gpusched.io/spot", config=True, help=_deprecated("spot_taint"))
    k8s_gpu_resource = Unicode("nvidia.com/gpu", config=True, help=_deprecated("gpu_resource"))
    k8s_instance = Unicode("default", config=True, help=_deprecated("instance"))
    k8s_service_account = Unicode("", config=True, help=_deprecated("service_account"))
    k8s_output_volume = Dict(config=True, help=_deprecated("output_volume"))
    k8s_container_resources = Dict(config=True, help=_deprecated("container_resources"))
    k8s_ttl_after_finished = Int(86400, config=True, help=_deprecated("ttl_after_finished"))
    k8s_copy_logs = Bool(True, config=True, help=_deprecated("copy_logs"))
    k8s_log_interval = Float(5.0, config=True, help=_deprecated("log_interval"))
    k8s_workers = Int(4, config=True, help=_deprecated("workers"))
    # --- Prometheus, for forecasts of GPU use from DCGM metrics (docs/forecasting.md) ---
    prometheus_url = Unicode(
        config=True,
        help="Base URL of a Prometheus server holding dcgm-exporter metrics (e.g. http://prometheus:9090), for "
        "GET forecast?series=gpu_busy. Empty: that series is off. Default: $GPUSCHED_PROMETHEUS_URL.",
    )
    prometheus_query = Unicode(
        DEFAULT_QUERY,
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
    aging_interval = Float(
        3600.0, config=True, help="Seconds of waiting that raise a job one priority class (no starvation)."
    )
    short_first = Bool(
        False,
        config=True,
        help="Give a job expected to run less than aging_interval (from its max_runtime or its learned runtime) "
        "what is left of that interval as a head start in the queue, within the no-starvation bound "
        "(docs/scheduling.md).",
    )
    pause_long_runs = Bool(
        True,
        config=True,
        help="Let a job that has not run yet pause a preemptible, checkpointing run of its own tenant (or a "
        "borrower) that has run aging_interval, right after that run's checkpoint (docs/scheduling.md, rule 8).",
    )
    oversize_grant_after = Float(
        OVERSIZE_GRANT_AFTER_S,
        min=0.0,
        allow_none=True,
        config=True,
        help="Seconds a job larger than its tenant's whole quota waits before it may run as if within quota, "
        "one such job at a time, so other tenants cannot reclaim it (docs/scheduling.md, rule 7). "
        "None: such jobs only ever borrow.",
    )
    tick_interval = Float(0.5, config=True, help="Seconds between scheduling passes.")
    heartbeat_timeout = Float(
        60.0, config=True, help="A running job whose runner is silent this long is lost and retried."
    )
    # --- stalled jobs: running, heartbeat alive, nothing moving (docs/stalls.md) ---
    stall_timeout = Float(
        1800.0,
        config=True,
        help="Seconds a running job may show no progress (no cell ends or starts, no output, GPUs idle, no CPU or "
        "storage I/O) before it is stalled; a job's own stall_timeout wins. 0: never.",
    )
    on_stall = Unicode(
        "alert",
        config=True,
        help="What happens to a stalled job: 'alert' (marked, counted, logged), 'requeue' (stopped and put back in "
        "line by its retry policy, like a lost job) or 'fail' (stopped and failed), after on_stall_grace.",
    )
    on_stall_grace = Float(
        300.0, config=True, help="Seconds between marking a job stalled and requeueing or failing it."
    )
    prometheus_gpu_selector = Unicode(
        DEFAULT_GPU_SELECTOR,
        config=True,
        help="PromQL label matchers of a job's GPUs on one node in dcgm-exporter's series, for the stall watch; "
        "{node}, {gpus} (a regex of its GPU indices) and {job} are filled in, escaped. On Kubernetes with "
        "dcgm-exporter's pod mapping: 'pod=~\"gpusched-{job}-.*\"'. Used when prometheus_url is set.",
    )
    prometheus_process_selector = Unicode(
        "",
        config=True,
        help="PromQL label matchers of a job's containers in cAdvisor's series (container_cpu_usage_seconds_total, "
        "container_fs_reads/writes_bytes_total), e.g. 'pod=~\"gpusched-{job}-.*\"'; with them the stall watch "
        "flags jobs waiting on data. Empty: GPU figures only.",
    )
    stall_sample_interval = Float(
        60.0, config=True, help="Seconds between the stall watch's Prometheus samples of the running jobs."
    )

    # --- notifications: word of a job's start and end (docs/notifications.md) ---
    webhook_secret = Unicode(
        config=True,
        help="Shared secret that signs webhook notifications (X-GPUSched-Signature: sha256=HMAC-SHA256 of the body). "
        "Empty: webhook targets are refused. Default: $GPUSCHED_WEBHOOK_SECRET.",
    )
    smtp = Dict(
        config=True,
        help="Mail server for email notifications: {'host', 'port' (587), 'starttls' (True), 'ssl' (False: SMTPS), "
        "'username', 'password_env' (the environment variable holding the password), 'from'}. "
        "Empty: email targets are refused.",
    )
    notify_defaults = Dict(
        config=True,
        help="Notification targets for jobs that name none: {'users': {name: [targets]}, 'tenants': {name: "
        "[targets]}}; a user's own (PUT gpusched/api/settings/notify) wins, then users, then tenants.",
    )
    notify_attempts = Int(5, config=True, help="Tries per notification before it is given up (and noted on the job).")
    notify_backoff = Float(2.0, config=True, help="Seconds before a notification's first retry; doubles each time.")
    notify_timeout = Float(10.0, config=True, help="Seconds one try of a notification may take.")

    service: Service | None = None

    @default("webhook_secret")
    def _default_webhook_secret(self) -> str:
        return os.environ.get("GPUSCHED_WEBHOOK_SECRET", "")

    def _notify_settings(self) -> NotifySettings:
        try:
            smtp = SmtpSettings.parse(self.smtp)
            unknown = sorted(set(self.notify_defaults) - {"users", "tenants"})
            if unknown:
                raise ValueError(f"c.GPUSched.notify_defaults: unknown key {unknown[0]!r}; use 'users' and 'tenants'")
            settings = NotifySettings(
                webhook_secret=self.webhook_secret,
                smtp=smtp,
                attempts=max(1, self.notify_attempts),
                backoff=self.notify_backoff,
                timeout=self.notify_timeout,
                defaults=dict(self.notify_defaults),
            )
            for targets in self.notify_defaults.values():
                for value in dict(targets).values():
                    parse_targets(value, settings.channels)
        except (TypeError, ValueError) as exc:  # SpecError is a ValueError
            raise ValueError(f"c.GPUSched notification settings: {exc}") from None
        return settings

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return str(Path(jupyter_data_dir()) / "gpusched")

    @default("prometheus_url")
    def _default_prometheus_url(self) -> str:
        return os.environ.get("GPUSCHED_PROMETHEUS_URL", "")

    @validate("prometheus_tenant_query")
    def _check_prometheus_tenant_query(self, proposal):
        if proposal["value"] and "{tenant}" not in proposal["value"]:
            raise ValueError(f"c.GPUSched.prometheus_tenant_query must contain {{tenant}}: {proposal['value']!r}")
        return proposal["value"]

    @validate("on_stall")
    def _check_on_stall(self, proposal):
        if proposal["value"] not in STALL_POLICIES:
            raise ValueError(
                f"c.GPUSched.on_stall must be one of {', '.join(STALL_POLICIES)}, not {proposal['value']!r}"
            )
        return proposal["value"]

    @validate("policy")
    def _check_policy(self, proposal):
        if proposal["value"] not in policy_names():
            raise ValueError(f"c.GPUSched.policy must be one of {', '.join(policy_names())}, not {proposal['value']!r}")
        return proposal["value"]

    @validate("backend")
    def _check_backend(self, proposal):
        if proposal["value"] not in BACKEND_SHORTCUTS:
            raise ValueError(f"c.GPUSched.backend must be 'local' or 'kubernetes', not {proposal['value']!r}")
        return proposal["value"]

    @property
    def is_multi_user(self) -> bool:
        return self.multi_user

    # --- the backend ------------------------------------------------------------------------
    def chosen_backend_class(self) -> type[Backend]:
        """`backend_class`, else the class the `backend` shortcut names."""
        if self.backend_class is not None:
            return self.backend_class
        return import_item(BACKEND_SHORTCUTS[self.backend])

    def _section(self, name: str) -> Config:
        return self.config[name] if name in self.config else Config()

    def _set_here(self, name: str) -> bool:
        """Was this trait of ours given a value (in our config sections or to the constructor)?"""
        if any(name in self._section(section) for section in self.section_names()):
            return True
        return getattr(self, name) != self.traits()[name].default()

    def backend_shortcuts(self) -> Config:
        """The backends' settings our shortcuts and deprecated names stand for, where the backend's
        own section does not set them: `local_gpus` -> c.LocalBackend.virtual_gpus, `max_log_bytes` -> both
        backends' `max_log_bytes`, each
        `k8s_<name>` -> c.KubernetesBackend.<name> (with a warning), the spot entries of `pools`
        -> c.KubernetesBackend.spot_pools."""
        out = Config()
        local, k8s = self._section("LocalBackend"), self._section("KubernetesBackend")
        if "virtual_gpus" not in local:
            out.LocalBackend.virtual_gpus = self.local_gpus
        for section, name in ((local, "LocalBackend"), (k8s, "KubernetesBackend")):
            if self._set_here("max_log_bytes") and "max_log_bytes" not in section:
                out[name].max_log_bytes = self.max_log_bytes
        for name in DEPRECATED_K8S:
            if not self._set_here(f"k8s_{name}"):
                continue
            trait = K8S_TRAIT_NAMES.get(name, name)
            self.log.warning("c.GPUSched.k8s_%s is deprecated: use c.KubernetesBackend.%s", name, trait)
            if trait not in k8s:
                out.KubernetesBackend[trait] = getattr(self, f"k8s_{name}")
        if "spot_pools" not in k8s:
            out.KubernetesBackend.spot_pools = sorted(name for name, t in self.pools.items() if (t or {}).get("spot"))
        return out

    def apply_backend_shortcuts(self) -> Config:
        """Merge `backend_shortcuts()` into this app's config, which a backend built as its child
        reads, and return that config (e.g. for reading c.KubernetesBackend.* without a server)."""
        self.update_config(self.backend_shortcuts())
        return self.config

    def make_backend(self) -> Backend:
        """The backend, built as a Configurable child of this app (it reads c.<ItsClass>.*)."""
        self.apply_backend_shortcuts()
        cls = self.chosen_backend_class()
        return cast(Any, cls)(parent=self)

    # --- the service and the handlers' settings ---------------------------------------------
    def _tenants(self) -> tuple[Tenant, ...]:
        out = []
        for name, terms in sorted(self.tenants.items()):
            terms = terms or {}
            out.append(
                Tenant(
                    name,
                    int(terms.get("quota", 0)),
                    None if terms.get("burst") is None else int(terms["burst"]),
                    _share(terms.get("interactive_share", self.interactive_share), name),
                )
            )
        return tuple(out)

    def _pools(self, backend: Backend) -> tuple[Pool, ...]:
        pools = tuple(
            Pool(
                name,
                spot=bool(t.get("spot", False)),
                price_per_gpu_hour=float(t.get("price_per_gpu_hour", 0.0)),
                gpu_type=t.get("gpu_type"),
                preempt_grace=_grace(t.get("preempt_grace"), name),
            )
            for name, t in sorted(self.pools.items())
        )
        configured = {p.name for p in pools}
        # A cluster backend reports the pools it finds (spot where its nodes carry the spot taint).
        return pools + tuple(p for p in backend.pools() if p.name not in configured)

    def _check_multi_user(self) -> None:
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

    def service_config(self, backend: Backend) -> ServiceConfig:
        data_dir = Path(self.data_dir).expanduser()
        assert self.serverapp is not None
        return ServiceConfig(
            db_url=self.db_url or default_url(data_dir),
            data_dir=data_dir,
            root_dir=Path(self.serverapp.root_dir),
            policy=self.policy,
            tenants=self._tenants(),
            budgets=tenant_budgets(self.tenants),
            interactive_share=_share(self.interactive_share, self.default_tenant),
            kernels_outlive_restart=self.is_multi_user,
            interactive_idle=IdlePolicy(
                self.interactive_idle_timeout,
                self.interactive_idle_warning,
                self.interactive_keep_max,
                self.interactive_reclaim_only_when_waiting,
            ),
            default_tenant=self.default_tenant,
            user_tenants=dict(self.user_tenants),
            pools=self._pools(backend),
            scheduling=SchedulerConfig(
                aging_interval=self.aging_interval,
                short_first=self.short_first,
                pause_long_runs=self.pause_long_runs,
                oversize_grant_after=self.oversize_grant_after,
            ),
            tick_interval=self.tick_interval,
            health=HealthConfig(heartbeat_timeout=self.heartbeat_timeout),
            prometheus=PrometheusSource(self.prometheus_url, self.prometheus_query, self.prometheus_tenant_query),
            scaling=parse_scaling(self.scaling),
            stalls=StallSettings(
                timeout=self.stall_timeout,
                on_stall=self.on_stall,
                grace=self.on_stall_grace,
                prometheus_url=self.prometheus_url,
                gpu_selector=self.prometheus_gpu_selector,
                process_selector=self.prometheus_process_selector,
                prometheus_interval=self.stall_sample_interval,
            ),
            notify=self._notify_settings(),
        )

    def handler_settings(self, service: Service | None) -> GPUSchedSettings:
        return GPUSchedSettings(
            service=service,
            owner=getpass.getuser(),
            admin_users=frozenset(self.admin_users),
            identity_usernames=self.identity_usernames,
            multi_user=self.is_multi_user,
            group_tenants=dict(self.group_tenants),
            admin_groups=frozenset(self.admin_groups),
            user_root_template=self.user_root_template,
        )

    def initialize_settings(self) -> None:
        self.service = None
        if self.is_multi_user:
            self._check_multi_user()
        backend = self.make_backend()
        config = self.service_config(backend)
        self.service = Service(config, backend)
        self.settings[SETTINGS_KEY] = self.handler_settings(self.service)
        self.log.info(
            "jupyter-gpusched: %s policy, %s backend, %d GPUs, store %s",
            self.policy,
            backend.name,
            self.service.scheduler.cluster.total_gpus,
            config.db_url,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers("/"))  # ExtensionApp prepends the server's base_url

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        answer_long_request_lines(serverapp)  # an over-long URI gets a 414, not a closed connection
        if self.service is not None:
            self.service.start()

    async def stop_extension(self) -> None:
        if self.service is not None:
            await self.service.stop()


def _share(value: Any, tenant: str) -> float | None:
    """A tenant's interactive share, checked: a fraction of its quota, or None (no cap)."""
    if value is None:
        return None
    share = float(value)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"interactive_share of tenant {tenant!r} must be between 0 and 1, got {value!r}")
    return share


def _grace(value: Any, pool: str) -> float | None:
    """A pool's grace period, checked: seconds >= 0, or None (the backend's preempt_grace)."""
    if value is None:
        return None
    grace = float(value)
    if not grace >= 0.0:
        raise ValueError(f"preempt_grace of pool {pool!r} must be >= 0 seconds, got {value!r}")
    return grace
