"""GET /gpusched/api/health: the probe endpoint answers without any credential, and says nothing else."""

from __future__ import annotations

import json

from tornado.httpclient import AsyncHTTPClient

pytestmark = __import__("pytest").mark.timeout(60)


async def test_health_answers_ok_without_a_token(jp_serverapp, jp_http_port, jp_base_url, api):
    url = f"http://127.0.0.1:{jp_http_port}{jp_base_url}gpusched/api/health"
    r = await AsyncHTTPClient().fetch(url, raise_error=False)  # no token, no cookie
    assert r.code == 200 and json.loads(r.body) == {"status": "ok"}
    assert r.headers["Content-Type"].startswith("application/json")
    # The same credential-less client is refused by every other API route: health is the one exception.
    r = await AsyncHTTPClient().fetch(url.replace("/health", "/jobs"), raise_error=False)
    assert r.code == 403
    # With a token it answers the same.
    assert await api("GET", "health") == (200, {"status": "ok"})
