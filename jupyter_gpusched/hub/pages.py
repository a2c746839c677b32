"""The hub service's two HTML pages: a landing page (any user) and the admin dashboard.

Both are plain server-rendered pages. A browser that is not signed in is sent through the
Hub's OAuth login and comes back with the service's cookie; the landing page also sets the
XSRF cookie that cookie-authenticated API calls (POST, DELETE) must echo in ``X-XSRFToken``.
"""

from __future__ import annotations

import html
from collections import Counter

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web

from ..server.access import AUTH_RESOURCE, Identity
from ..server.serialize import iso
from ..service import Service

STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
)


class PageHandler(Identity, JupyterHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def service(self) -> Service:
        service = self.gpusched.service
        if service is None:
            raise web.HTTPError(503, "this server runs no GPU scheduler")
        service.start()
        return service

    def page(self, title: str, body: str) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header("Cache-Control", "no-store")
        token = html.escape(self.xsrf_token.decode() if isinstance(self.xsrf_token, bytes) else self.xsrf_token)
        self.finish(
            f"<!doctype html><html><head><meta charset='utf-8'><meta name='xsrf-token' content='{token}'>"
            f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>{body}</body></html>"
        )


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


class HomeHandler(PageHandler):
    """Who you are here, your tenants, your jobs."""

    @web.authenticated
    @authorized
    def get(self):
        jobs = self.service.jobs(owner=self.user_name)[:100]
        api = url_path_join(self.base_url, "gpusched", "api")
        rows = [[j.id, j.state.value, j.spec.tenant, j.spec.gpus, j.spec.notebook, iso(j.submitted_at)] for j in jobs]
        admin = " (admin: <a href='dashboard'>dashboard</a>)" if self.is_admin else ""
        self.page(
            "GPU scheduler",
            f"<h1>GPU scheduler</h1><p>Signed in as <b>{html.escape(self.user_name)}</b>{admin}; "
            f"tenants: {html.escape(', '.join(self.user_tenants() or []))}.</p>"
            f"<p>REST API: <code>{html.escape(api)}/</code></p><h2>Your jobs</h2>"
            + (
                _table(["id", "state", "tenant", "GPUs", "notebook", "submitted"], rows) if rows else "<p>None yet.</p>"
            ),
        )


class DashboardHandler(PageHandler):
    """Admins: queues per tenant, the cluster, jobs by state and owner."""

    @web.authenticated
    @authorized
    def get(self):
        if not self.is_admin:
            raise web.HTTPError(403, "the dashboard is for admins only")
        s = self.service
        queues = s.queues()
        cluster = s.cluster()
        by_state = Counter(j.state.value for j in s.scheduler.jobs.values())
        by_owner = Counter(j.spec.owner for j in s.scheduler.jobs.values() if not j.state.terminal)
        cols = ("quota", "burst", "used", "borrowed", "running", "queued", "queued_gpus")
        q_rows = [
            [t, *("any" if q.get(k, "") is None else q.get(k, "") for k in cols)] for t, q in sorted(queues.items())
        ]
        self.page(
            "GPU scheduler: dashboard",
            "<h1>GPU scheduler dashboard</h1>"
            f"<p>{cluster['allocated_gpus']} of {cluster['total_gpus']} GPUs allocated "
            f"({cluster['utilization']:.0%}), policy {html.escape(cluster['policy'])}, backend {html.escape(cluster['backend'])}.</p>"
            "<h2>Tenants</h2>"
            + _table(["tenant", *cols], q_rows)
            + "<h2>Jobs by state</h2>"
            + _table(["state", "jobs"], sorted(by_state.items()))
            + "<h2>Active jobs by owner</h2>"
            + _table(["owner", "jobs"], by_owner.most_common()),
        )


def page_handlers(base_url: str) -> list[tuple[str, type]]:
    root = url_path_join(base_url, "gpusched")
    return [(root + "/?", HomeHandler), (root + "/dashboard", DashboardHandler)]
