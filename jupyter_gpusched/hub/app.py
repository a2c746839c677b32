"""`jupyter gpusched hub-service`: one shared scheduler for every user of a JupyterHub.

It is the same Jupyter server extension (`GPUSched`: same service, same REST handlers; here in
its hub-aware form, `extension.HubAwareGPUSched`, which adds the service's pages) on a
Jupyter server trimmed to a JupyterHub service:

- it listens where the Hub says (``JUPYTERHUB_SERVICE_URL``) under the service's prefix
  (``JUPYTERHUB_SERVICE_PREFIX``, e.g. ``/services/gpusched/``);
- requests are authenticated by Hub API tokens or the service's OAuth cookie
  (`HubServiceIdentityProvider`), and only the gpusched API is served
  (`GPUSchedOnlyAuthorizer`; no contents, kernels, terminals or other extensions);
- `c.GPUSched.multi_user` is on: jobs belong to the Hub user, Hub groups map to tenants,
  admins are the Hub's admins plus `admin_groups` / `admin_users`, and notebooks are read
  from each user's own folder (`user_root_template`).

Configuration: ``jupyter_gpusched_hub_config.py`` in the Jupyter config path, or
``--config=FILE`` (``.py``, ``.json``, or ``.yaml`` with `GPUSched` traits at the top level),
or ``--GPUSched.<name>=...`` on the command line.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from urllib.parse import urlparse

import yaml
from jupyter_server.serverapp import ServerApp
from jupyterhub.services.auth import HubOAuth
from traitlets import Bool, Dict, Unicode, default
from traitlets.config import Config

from .auth import GPUSchedOnlyAuthorizer, HubServiceIdentityProvider
from .extension import HubAwareGPUSched

DEFAULT_PORT = 10101


def _service_url() -> tuple[str, int | None]:
    url = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", ""))
    return url.hostname or "127.0.0.1", url.port


class HubServiceApp(ServerApp):
    """The jupyter-gpusched scheduler as a JupyterHub service."""

    name = "jupyter-gpusched-hub"
    description = __doc__
    gpusched_hub_service = True  # read by HubAwareGPUSched: forces multi-user mode
    # Only the gpusched handlers: no file access, no kernels, no terminals.
    default_services = ("auth",)  # type: ignore[assignment]  # fewer than ServerApp's, on purpose
    classes = [*ServerApp.classes, HubAwareGPUSched, HubOAuth]  # for --help-all

    terminals_enabled = Bool(False, config=True, help="Always off in the hub service.")
    jpserver_extensions = Dict({"jupyter_gpusched": True}, config=True, help="Only jupyter_gpusched is loaded.")

    @default("ip")
    def _default_ip(self) -> str:
        return _service_url()[0]

    @default("port")
    def _default_port(self) -> int:
        return _service_url()[1] or DEFAULT_PORT

    @default("port_retries")
    def _default_port_retries(self) -> int:
        return 0  # the Hub routes to one port; never drift to another

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/services/gpusched/"

    @default("default_url")
    def _default_default_url(self) -> str:
        return "/gpusched/"

    @default("identity_provider_class")
    def _default_identity_provider_class(self):
        return HubServiceIdentityProvider

    @default("authorizer_class")
    def _default_authorizer_class(self):
        return GPUSchedOnlyAuthorizer

    @default("open_browser")
    def _default_open_browser(self) -> bool:
        return False

    @default("allow_remote_access")
    def _default_allow_remote_access(self) -> bool:
        return True  # requests come through the Hub's proxy with the public Host header

    @default("trust_xheaders")
    def _default_trust_xheaders(self) -> bool:
        return True  # the proxy's X-Forwarded-* (client address in logs, https)

    @default("reraise_server_extension_failures")
    def _default_reraise(self) -> bool:
        return True  # a service without its scheduler must not start

    @default("root_dir")
    def _default_root_dir(self) -> str:
        return str(Path.cwd())

    def initialize(self, argv=None, find_extensions: bool = False, new_httpserver: bool = True, starter_extension=None):
        # Never pick up the server extensions installed for single-user servers (Lab, ...).
        super().initialize(
            argv, find_extensions=False, new_httpserver=new_httpserver, starter_extension=starter_extension
        )
        if not self._dispatching:
            self._keep_hub_token_from_jobs()

    def _keep_hub_token_from_jobs(self) -> None:
        """Jobs inherit this process's environment: read the Hub settings now, then drop the
        service's Hub token from the environment so no job is handed it."""
        auth = getattr(self.identity_provider, "hub_auth", None)
        if auth is None:
            return
        if not os.environ.get("JUPYTERHUB_API_TOKEN") and "api_token" not in self.config.get("HubOAuth", {}):
            self.log.critical("no JUPYTERHUB_API_TOKEN: run this as a JupyterHub service (see docs/jupyterhub.md)")
            self.exit(1)
        for name in ("api_token", "api_url", "base_url", "hub_prefix", "hub_host", "access_scopes", "cookie_options"):
            getattr(auth, name)
        for name in ("oauth_client_id", "oauth_redirect_uri"):  # only for browser logins
            try:
                getattr(auth, name)
            except Exception:  # noqa: BLE001 - an external service registered without OAuth
                pass
        for var in ("JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN"):
            os.environ.pop(var, None)

    def load_config_file(self, suppress_errors: bool = True) -> None:  # type: ignore[override]  # as ServerApp's
        if self.config_file and self.config_file.endswith((".yaml", ".yml")):
            self.update_config(yaml_config(self.config_file))
            return
        super().load_config_file(suppress_errors=suppress_errors)

    def init_webapp(self) -> None:
        super().init_webapp()
        # Tornado's own XSRF check runs before authentication, so it cannot tell token requests
        # (exempt) from cookie requests; Jupyter Server checks after authentication, with
        # JupyterHub's rules (as jupyterhub-singleuser does).
        self.web_app.settings["xsrf_cookies"] = False

    def init_server_extensions(self) -> None:
        self.jpserver_extensions = {"jupyter_gpusched": True}
        self.terminals_enabled = False
        super().init_server_extensions()

    config_file_name = Unicode(config=True, help="Name of the config file (default: jupyter_gpusched_hub_config).")

    @default("config_file_name")
    def _default_config_file_name(self) -> str:
        return "jupyter_gpusched_hub_config"


def yaml_config(path: str | os.PathLike) -> Config:
    """A YAML settings file as traitlets config: `ClassName: {trait: value}` sections
    (ServerApp, HubOAuth, ...) and, at the top level, `GPUSched` traits by name."""
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of settings, not {type(data).__name__}")
    config: dict = {"GPUSched": {}}
    for key, value in data.items():
        if key[:1].isupper() and isinstance(value, dict):
            config.setdefault(key, {}).update(value)
        else:
            config["GPUSched"][key] = value
    return Config(config)


def main(argv: list[str] | None = None) -> None:
    HubServiceApp.launch_instance(argv=sys.argv[1:] if argv is None else argv)
