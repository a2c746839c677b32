"""JupyterHub mode: one shared scheduler for every user of a hub.

- `app.HubServiceApp` (``jupyter gpusched hub-service`` / ``python -m jupyter_gpusched.hub``):
  the scheduler as a Hub-managed service; the same `GPUSched` extension and handlers as a
  single-user server, authenticated by the Hub (`auth`).
- `forward`: a user's own server relays ``/gpusched/api/*`` to that service.
- `configure_hub(c, ...)`: the lines of ``jupyterhub_config.py`` that wire both up.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

SERVER_ROLE_SCOPES = ["users:activity!user", "access:servers!server"]  # JupyterHub's default 'server' role
SERVICE_SCOPES = ["read:servers"]  # the service sees which users' servers run (hub/orphans.py)


def service_url(name: str = "gpusched", port: int = 10101, host: str = "127.0.0.1") -> str:
    """The URL user servers reach the service at (direct, not through the proxy)."""
    return f"http://{host}:{port}/services/{name}/"


def configure_hub(
    c: Any,
    *,
    name: str = "gpusched",
    port: int = 10101,
    config_file: str | None = None,
    args: Sequence[str] = (),
    user: str | None = None,
    environment: Mapping[str, str] | None = None,
    api_token: str | None = None,
    grant_all_users: bool = True,
) -> str:
    """Register the scheduler as a JupyterHub service in a ``jupyterhub_config.py`` `c`.

    - adds the service ``name`` on ``127.0.0.1:port``, started by the Hub (restarted if it dies)
      with ``python -m jupyter_gpusched.hub [--config=config_file] [args...]``; with
      ``api_token`` it is registered as an *external* service you start yourself instead;
    - lets users reach it: the ``user`` role gets ``access:services!service=<name>``
      (``grant_all_users``; else grant that scope to the roles/groups you choose), and each
      single-user server's token gets it too (``c.Spawner.server_token_scopes``);
    - gives the service itself ``read:servers`` (a role named ``<name>-service``), so it can release
      the GPUs of kernels whose server stopped without shutting them down (hub/orphans.py);
    - tells single-user servers where it is (``GPUSCHED_HUB_SERVICE_URL`` in
      ``c.Spawner.environment``), so they forward to it instead of scheduling on their own.

    Call it after your own settings of those options. Returns the service's URL.
    """
    url = service_url(name, port)
    access = f"access:services!service={name}"
    service: dict[str, Any] = {
        "name": name,
        "url": f"http://127.0.0.1:{port}",
        "oauth_no_confirm": True,
        "display": True,
    }
    if api_token:
        service["api_token"] = api_token
    else:
        service["command"] = [
            sys.executable,
            "-m",
            "jupyter_gpusched.hub",
            *([f"--config={config_file}"] if config_file else []),
            *args,
        ]
        if environment:
            service["environment"] = dict(environment)
        if user:
            service["user"] = user

    hub, spawner = c.JupyterHub, c.Spawner
    hub.services = [s for s in (hub.services if "services" in hub else []) if s.get("name") != name] + [service]

    roles = [dict(r) for r in (hub.load_roles if "load_roles" in hub else [])]
    own_role = f"{name}-service"
    roles = [r for r in roles if r.get("name") != own_role]
    roles.append({"name": own_role, "scopes": list(SERVICE_SCOPES), "services": [name]})
    hub.load_roles = roles

    if grant_all_users:
        user_role = next((r for r in roles if r.get("name") == "user"), None)
        if user_role is None:
            roles.append({"name": "user", "scopes": ["self", access]})
        elif access not in user_role.setdefault("scopes", ["self"]):
            user_role["scopes"] = [*user_role["scopes"], access]
        hub.load_roles = roles

    scopes = spawner.server_token_scopes if "server_token_scopes" in spawner else SERVER_ROLE_SCOPES
    if callable(scopes):
        raise ValueError(
            f"c.Spawner.server_token_scopes is a function: make it return {access!r} too, then drop it here"
        )
    scopes = list(scopes)
    if access not in scopes:
        scopes.append(access)
    spawner.server_token_scopes = scopes

    env = dict(spawner.environment) if "environment" in spawner else {}
    env["GPUSCHED_HUB_SERVICE_URL"] = url
    spawner.environment = env
    return url
