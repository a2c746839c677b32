"""Admin-only Voila dashboards.

A notebook whose metadata says ``{"gpusched": {"admin_only": true}}`` (the admin
dashboard, notebooks/dashboard.ipynb) renders under Voila (``/voila/render/...``) only
for gpusched admins: the same rule as the REST API (`Identity.is_admin`: on a
single-user server with `c.GPUSched.admin_users` empty, everyone holding the token is
the owner and an admin). Others get 403 before any kernel starts. In a user's server that
forwards to the JupyterHub service, the service decides: its ``api/me`` answer for the
server's user, refreshed every minute (`GPUSchedSettings.remote_admin`).

The check is Voila's `prelaunch_hook`. This module is also a tiny server extension that
installs it (jupyter-config/jupyter_server_config.d/jupyter_gpusched_dashboard.json turns
it on): it loads before Voila's (extensions load in name order) and sets
`c.VoilaConfiguration.prelaunch_hook` unless one is configured, in which case it runs
ours first, then that one. Without the extension, the same in jupyter_server_config.py::

    from jupyter_gpusched.server.dashboard import admin_only_prelaunch_hook
    c.VoilaConfiguration.prelaunch_hook = admin_only_prelaunch_hook
"""

from __future__ import annotations

from typing import Any

from tornado import web

from .access import Identity
from .settings import settings_of


class _Asker(Identity):
    """The identity rules applied to any handler (Voila's is not one of ours)."""

    def __init__(self, handler: web.RequestHandler):
        self._handler = handler

    @property
    def settings(self) -> dict[str, Any]:
        return self._handler.settings

    @property
    def current_user(self) -> Any:
        return self._handler.current_user


def is_admin(handler: web.RequestHandler) -> bool:
    gs = settings_of(handler.settings)
    if gs is None:
        return True  # gpusched is not running here: nothing to guard
    if gs.remote_admin is not None:  # a user's server under a hub: the hub service decides
        admin = gs.remote_admin()
        if admin is None:
            raise web.HTTPError(
                503, "cannot yet confirm with the GPU scheduler service that you are an admin; retry shortly"
            )
        return admin
    return _Asker(handler).is_admin


def admin_only(notebook: Any) -> bool:
    meta = getattr(notebook, "metadata", None) or {}
    return bool((meta.get("gpusched") or {}).get("admin_only"))


def admin_only_prelaunch_hook(req: web.RequestHandler, notebook: Any, cwd: str, _then=None):
    """Voila prelaunch hook: 403 for non-admins on admin-only notebooks."""
    if admin_only(notebook) and not is_admin(req):
        raise web.HTTPError(403, "this dashboard is for gpusched admins only (c.GPUSched.admin_users)")
    if _then is not None:
        return _then(req, notebook=notebook, cwd=cwd)
    return None


def _jupyter_server_extension_points():
    return [{"module": "jupyter_gpusched.server.dashboard"}]


LAB_EXTENSION = "jupyter-gpusched"


def _load_jupyter_server_extension(serverapp) -> None:
    section = serverapp.config.VoilaConfiguration
    # Our lab extension is a JupyterLab sidebar: in a Voila page it has no shell to live in,
    # and loading it there only costs a download (and console errors). Keep it out unless
    # the admin chose Voila's extensions themselves.
    if "extension_allowlist" not in section:
        denied = list(section.get("extension_denylist") or []) if "extension_denylist" in section else []
        if LAB_EXTENSION not in denied:
            section.extension_denylist = [*denied, LAB_EXTENSION]
    other = section.get("prelaunch_hook") if "prelaunch_hook" in section else None
    if other is admin_only_prelaunch_hook or getattr(other, "_gpusched_guard", False):
        return
    if other is None:
        section.prelaunch_hook = admin_only_prelaunch_hook
    else:

        def guard_then_other(req, notebook, cwd):
            return admin_only_prelaunch_hook(req, notebook, cwd, _then=other)

        guard_then_other._gpusched_guard = True  # type: ignore[attr-defined]
        section.prelaunch_hook = guard_then_other
    serverapp.log.info("jupyter-gpusched: admin-only Voila dashboards guarded")
