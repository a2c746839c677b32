"""Who is asking and what they may do: identity, admin rights, tenants, the notebook root."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .settings import GPUSchedSettings, settings_of
from .validation import ApiError

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Service

AUTH_RESOURCE = "gpusched"  # the resource name Jupyter's authorizer is asked about


class Identity:
    """Who is asking and what they may do; mixed into every gpusched handler.

    Single-user server: everyone holding its token is its owner and an admin (unless
    `admin_users` names someone). Multi-user (the JupyterHub service, `GPUSchedSettings.multi_user`):
    the authenticated user owns their jobs; admins are the Hub's admins, members of
    `admin_groups` and `admin_users`; Hub groups map to tenants (`group_tenants`); notebooks
    are read from the user's own folder (`user_root_template`)."""

    if TYPE_CHECKING:  # what the handler this is mixed into provides

        @property
        def settings(self) -> dict[str, Any]: ...

        @property
        def current_user(self) -> Any: ...

        @property
        def service(self) -> Service: ...

    @property
    def gpusched(self) -> GPUSchedSettings:
        return settings_of(self.settings) or GPUSchedSettings()

    @property
    def multi_user(self) -> bool:
        return self.gpusched.multi_user

    @property
    def hub_user(self) -> dict[str, Any]:
        """The Hub's model of the user (name, admin, groups), where a Hub authenticated the request."""
        return getattr(self.current_user, "hub_user", None) or {}

    @property
    def user_name(self) -> str:
        """Who is asking. On a single-user server everyone holding its token is its owner."""
        if self.multi_user or self.gpusched.identity_usernames:
            return self.current_user.username
        return self.gpusched.owner or getpass.getuser()

    @property
    def is_admin(self) -> bool:
        admins = self.gpusched.admin_users
        if self.multi_user:
            hub = self.hub_user
            groups = set(hub.get("groups") or ())
            return bool(hub.get("admin")) or bool(groups & self.gpusched.admin_groups) or self.user_name in admins
        return not admins or self.user_name in admins

    def user_tenants(self) -> list[str] | None:
        """Tenants this user may charge (the first is their default), or None: any (single-user)."""
        if not self.multi_user:
            return None
        groups = set(self.hub_user.get("groups") or ())
        out = [t for g, t in self.gpusched.group_tenants.items() if g in groups]
        fallback = self.service.tenant_for(self.user_name, None)
        return list(dict.fromkeys(out)) if out else [fallback]

    def check_tenant(self, requested: str | None) -> str | None:
        """The tenant a submission is charged to: the requested one if this user may use it."""
        allowed = self.user_tenants()
        if allowed is None:
            return requested
        if requested is None:
            return allowed[0]
        if requested not in allowed and not self.is_admin:
            raise ApiError(
                403,
                "forbidden",
                f"you may not submit to tenant {requested!r}; your tenants: {', '.join(allowed)}",
                "tenant",
            )
        return requested

    def notebook_root(self) -> Path:
        """The folder a submitted notebook path is resolved in (and may not leave)."""
        template = self.gpusched.user_root_template if self.multi_user else None
        if not template:
            return Path(self.settings["server_root_dir"])
        name = self.user_name
        if not name or name.startswith(".") or any(c in name for c in "/\\\0"):
            raise ApiError(403, "forbidden", f"user name {name!r} cannot name a folder for notebooks", "notebook")
        try:
            root = Path(template.format(username=name)).expanduser()
        except RuntimeError:  # ~name of a user this machine does not know
            root = None
        if root is None or not root.is_absolute():
            raise ApiError(
                400, "not_found", f"user {name!r} has no notebook folder on the scheduler's machine", "notebook"
            )
        return root

    def require_admin(self, what: str) -> None:
        if not self.is_admin:
            raise ApiError(403, "forbidden", f"{what} is for admins only", None)
