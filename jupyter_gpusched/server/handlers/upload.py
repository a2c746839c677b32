"""PUT /gpusched/api/internal/jobs/{id}/upload/{notebook|files/<path>}: a job's pod uploading its results.

Authenticated ONLY by the job's upload token (header X-Gpusched-Upload-Token), never by Jupyter's auth: this
handler is a plain tornado handler, so a Jupyter token or cookie gives no access here, and the upload token
gives none anywhere else (every other gpusched route wants Jupyter's auth). PUT is its only method.
"""

from __future__ import annotations

import json
import urllib.parse

from tornado import web

from ...service.results_upload import UploadRefused, store_upload
from ..settings import settings_of

TOKEN_HEADER = "X-Gpusched-Upload-Token"


class UploadHandler(web.RequestHandler):
    def check_xsrf_cookie(self) -> None:
        return None  # no cookies are involved: the token in the header is the credential

    def _error(self, status: int, code: str, message: str) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"error": code, "message": message, "field": None}))

    async def put(self, job_id: str, what: str) -> None:
        settings = settings_of(self.settings)
        service = settings.service if settings is not None else None
        if service is None:
            return self._error(503, "unavailable", "this server runs no GPU scheduler")
        token = self.request.headers.get(TOKEN_HEADER, "")
        try:
            store_upload(service, job_id, token, urllib.parse.unquote(what), self.request.body)
        except UploadRefused as exc:
            code = {403: "forbidden", 413: "too_large"}.get(exc.status, "invalid_value")
            return self._error(exc.status, code, str(exc))
        self.set_status(204)
        self.finish()
