"""What the gpusched handlers need from the extension, handed to Tornado once, typed.

The extension stores one `GPUSchedSettings` under `SETTINGS_KEY` in the web application's
settings; handlers read it through `GPUSchedHandler.gpusched` (or `settings_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..service import Service
from .remote_kernels import RemoteKernelRequests

SETTINGS_KEY = "gpusched"


@dataclass(frozen=True)
class GPUSchedSettings:
    # None where this server runs no scheduler of its own (it forwards to one elsewhere)
    service: Service | None = None
    owner: str = ""  # single-user: the server's owner, who owns every job
    admin_users: frozenset[str] = frozenset()  # empty on a single-user server: everyone is an admin
    identity_usernames: bool = False  # the authenticated user owns their jobs (not the server's owner)
    multi_user: bool = False  # the JupyterHub service: Hub users, groups, admins (see access.Identity)
    group_tenants: Mapping[str, str] = field(default_factory=dict)  # multi-user: Hub group -> tenant
    admin_groups: frozenset[str] = frozenset()  # multi-user: Hub groups whose members are admins
    user_root_template: str = ""  # multi-user: each user's notebook folder, with {username}
    # Where another server decides who is an admin (a user's server forwarding to the hub
    # service): its last answer for this server's user, None until it has answered.
    remote_admin: Callable[[], bool | None] | None = None
    # Where that other server takes GPU kernels' requests (server/remote_kernels.py), when this one has none.
    remote_kernels: RemoteKernelRequests | None = None


def settings_of(tornado_settings: Mapping[str, Any]) -> GPUSchedSettings | None:
    """The extension's settings, or None where the extension is not running on this server."""
    return tornado_settings.get(SETTINGS_KEY)
