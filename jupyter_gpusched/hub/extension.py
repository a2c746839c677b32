"""The extension as the package installs it: `GPUSched` plus JupyterHub's two modes.

- In the hub service (`app.HubServiceApp`, or `c.GPUSched.multi_user`) it serves many users:
  besides the REST API, the service's two pages (`pages`), and a backend wrapper that
  refuses a notebook swapped for a link after submission (`contain.ContainedBackend`).
- In a user's server under a hub with the service configured (`hub_service_url`), it runs
  no scheduler: it forwards the REST API to the service as this server's user (`forward`).
- Otherwise it is `GPUSched`, unchanged.

The generic server (`jupyter_gpusched.server`) knows nothing of this; the package's
extension point (`jupyter_gpusched._jupyter_server_extension_points`) names this class.
"""

from __future__ import annotations

import os
from typing import cast

from traitlets import Float, Unicode, default

from ..backends.base import Backend
from ..server.app import GPUSched
from ..server.remote_kernels import RemoteKernelRequests
from ..server.settings import SETTINGS_KEY
from .contain import ContainedBackend
from .forward import CallerStatus, Forwarder, ForwardSettings, forward_handlers
from .orphans import OrphanedKernels
from .pages import page_handlers


class HubAwareGPUSched(GPUSched):
    """GPUSched, serving many users in the hub service, or forwarding to it from a user's server."""

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

    kernel_server_check_interval = Float(
        30.0,
        config=True,
        help="Hub service: seconds between asks to the Hub which users' servers run; a GPU kernel's reservation "
        "whose server is gone (or restarted since) is released (hub/orphans.py). 0: never.",
    )

    caller: CallerStatus | None = None
    orphans: OrphanedKernels | None = None

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

    def make_backend(self) -> Backend:
        backend = super().make_backend()
        if self.is_multi_user:  # a job runs the notebook checked at submission, or none
            return cast(Backend, ContainedBackend(backend))
        return backend

    def initialize_settings(self) -> None:
        if not self.forwards:
            super().initialize_settings()
            return
        self.service = None
        forwarder = Forwarder(self.hub_service_url, self.hub_api_token)
        caller = self.caller = CallerStatus(forwarder)
        self.settings[SETTINGS_KEY] = ForwardSettings(
            forwarder=forwarder,
            remote_admin=lambda: caller.admin,
            remote_kernels=RemoteKernelRequests(forwarder.url, forwarder.token),  # GPU kernels ask the service
        )
        self.log.info("jupyter-gpusched: forwarding to the hub service at %s", self.hub_service_url)

    def initialize_handlers(self) -> None:
        # ExtensionApp prepends the server's base_url
        if self.forwards:
            self.handlers.extend(forward_handlers("/"))
            return
        if self.is_multi_user:
            self.handlers.extend(page_handlers("/"))
        super().initialize_handlers()

    async def _start_jupyter_server_extension(self, serverapp) -> None:
        await super()._start_jupyter_server_extension(serverapp)
        if self.caller is not None:
            self.caller.start()
        auth = getattr(serverapp.identity_provider, "hub_auth", None)
        if self.is_multi_user and self.service is not None and auth is not None and auth.api_token:
            self.orphans = OrphanedKernels(
                self.service, auth.api_url, auth.api_token, self.kernel_server_check_interval, self.log
            )
            self.orphans.start()

    async def stop_extension(self) -> None:
        await super().stop_extension()
        if self.caller is not None:
            self.caller.stop()
        if self.orphans is not None:
            self.orphans.stop()
