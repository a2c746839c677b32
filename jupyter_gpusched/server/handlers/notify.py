"""`GET/PUT <base_url>/gpusched/api/settings/notify`: the caller's own default notification targets.

A job that carries no `notify` field gets these (docs/notifications.md); PUT `{"notify": null}` forgets
them, so the operator's c.GPUSched.notify_defaults apply again.
"""

from __future__ import annotations

from jupyter_server.auth.decorator import authorized
from tornado import web

from ..base import GPUSchedHandler, api_errors
from ..validation import ApiError, parse_json_object

MAX_SETTINGS_BYTES = 64 * 1024


class NotifySettingsHandler(GPUSchedHandler):
    def _answer(self) -> None:
        tenant = self.check_tenant(None) or self.service.tenant_for(self.user_name, None)
        targets, source = self.service.notices.defaults_for(self.user_name, tenant)
        self.finish({"notify": [t.public() for t in targets], "source": source})

    @web.authenticated
    @authorized
    @api_errors
    async def get(self):
        """The caller's default targets and where they come from (user, config:user, config:tenant, none)."""
        self._answer()

    @web.authenticated
    @authorized
    @api_errors
    async def put(self):
        body = parse_json_object(self.request.body, MAX_SETTINGS_BYTES)
        unknown = sorted(set(body) - {"notify"})
        if unknown or "notify" not in body:
            field = unknown[0] if unknown else "notify"
            raise ApiError(400, "invalid_value", 'the body is {"notify": [targets]} (or null to forget them)', field)
        self.service.require_owner()
        self.service.notices.set_user_defaults(self.user_name, body["notify"])
        self._answer()
