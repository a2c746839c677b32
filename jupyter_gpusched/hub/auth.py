"""Who is asking, in a hub: JupyterHub OAuth / API tokens → a user with Hub groups and admin flag.

The hub service is a Jupyter server, so its handlers authenticate through Jupyter's
IdentityProvider and authorize through its Authorizer. Here both are bound to JupyterHub:

- `HubServiceIdentityProvider` accepts a Hub API token (``Authorization: token ...``) or the
  service's OAuth cookie (browser visits; JupyterHub's XSRF rules apply), asks the Hub who
  owns it (cached by HubAuth), and refuses tokens without ``access:services!service=<name>``.
  The user it returns carries the Hub's user model (`hub_user`: name, admin, groups), which
  the REST handlers read for admin rights and tenants.
- `GPUSchedOnlyAuthorizer` allows the gpusched resource and nothing else, so a Jupyter
  handler that slipped into the service (contents, kernels, ...) could never be used to run
  code or read files as the service's user.
"""

from __future__ import annotations

from jupyter_server.auth import Authorizer
from jupyterhub.singleuser.extension import JupyterHubIdentityProvider

from ..server.access import AUTH_RESOURCE


class HubServiceIdentityProvider(JupyterHubIdentityProvider):
    """JupyterHub's own identity provider (OAuth + tokens, XSRF for cookies), for a service."""

    @property
    def token(self) -> str:
        # The base class answers with the service's Hub API token, which the server would write
        # into its runtime file and show in log URLs. Nobody logs in to the service with it.
        return ""

    def identity_model(self, user) -> dict:
        model = super().identity_model(user)
        hub = getattr(user, "hub_user", None) or {}
        model["admin"] = bool(hub.get("admin"))
        model["groups"] = sorted(hub.get("groups") or ())
        return model


class GPUSchedOnlyAuthorizer(Authorizer):
    """Allow the gpusched API to every authenticated Hub user; every other Jupyter resource to no one.

    Who may see which job is decided by the gpusched handlers themselves (owner, admin)."""

    def is_authorized(self, handler, user, action: str, resource: str) -> bool:
        return resource == AUTH_RESOURCE
