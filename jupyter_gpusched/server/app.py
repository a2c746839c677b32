"""The Jupyter server extension: configuration (`c.GPUSched.*`) and wiring."""

from __future__ import annotations

import getpass
from pathlib import Path

from jupyter_core.paths import jupyter_data_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Bool, Dict, Float, Int, List, Unicode, default, validate

from ..core import Pool, Tenant, policy_names
from ..core.health import HealthConfig
from ..service import Service, ServiceConfig
from ..store import default_url
from .handlers import handlers


class GPUSched(ExtensionApp):
    """Queue notebooks as GPU jobs, scheduled fairly on this machine or a cluster."""

    name = "jupyter_gpusched"
    load_other_extensions = True

    backend = Unicode("local", config=True, help="Where jobs run: 'local' (this machine).")
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
    aging_interval = Float(3600.0, config=True, help="Seconds of waiting that raise a job one priority class (no starvation).")
    tick_interval = Float(0.5, config=True, help="Seconds between scheduling passes.")
    heartbeat_timeout = Float(60.0, config=True, help="A running job whose runner is silent this long is lost and retried.")

    @default("data_dir")
    def _default_data_dir(self) -> str:
        return str(Path(jupyter_data_dir()) / "gpusched")

    @validate("policy")
    def _check_policy(self, proposal):
        if proposal["value"] not in policy_names():
            raise ValueError(f"c.GPUSched.policy must be one of {', '.join(policy_names())}, not {proposal['value']!r}")
        return proposal["value"]

    @validate("backend")
    def _check_backend(self, proposal):
        if proposal["value"] != "local":
            raise ValueError(f"c.GPUSched.backend must be 'local', not {proposal['value']!r}")
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

    def make_backend(self):
        from ..backends.local import LocalBackend

        return LocalBackend(virtual_gpus=self.local_gpus)

    def initialize_settings(self) -> None:
        data_dir = Path(self.data_dir).expanduser()
        config = ServiceConfig(
            db_url=self.db_url or default_url(data_dir),
            data_dir=data_dir,
            root_dir=Path(self.serverapp.root_dir),
            policy=self.policy,
            tenants=self._tenants(),
            default_tenant=self.default_tenant,
            user_tenants=dict(self.user_tenants),
            pools=self._pools(),
            aging_interval=self.aging_interval,
            tick_interval=self.tick_interval,
            health=HealthConfig(heartbeat_timeout=self.heartbeat_timeout),
        )
        self.service = Service(config, self.make_backend())
        self.settings.update(
            gpusched_service=self.service,
            gpusched_admin_users=set(self.admin_users),
            gpusched_identity_usernames=self.identity_usernames,
            gpusched_owner=getpass.getuser(),
        )
        self.log.info(
            "jupyter-gpusched: %s policy, %s backend, %d GPUs, store %s",
            self.policy,
            self.backend,
            self.service.scheduler.cluster.total_gpus,
            config.db_url,
        )

    def initialize_handlers(self) -> None:
        self.handlers.extend(handlers("/"))  # ExtensionApp prepends the server's base_url

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        self.service.start()

    async def stop_extension(self) -> None:
        await self.service.stop()
