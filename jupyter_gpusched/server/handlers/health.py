"""GET /gpusched/api/health: is this server up? For liveness/readiness probes (the Helm chart's).

Unauthenticated on purpose (a kubelet has no Jupyter token) and it tells nothing but "ok": a plain tornado
handler, so Jupyter's auth and the hub service's authorizer are not involved.
"""

from __future__ import annotations

import json

from tornado import web


class HealthHandler(web.RequestHandler):
    def get(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps({"status": "ok"}))
