"""Read a GPU-demand history from a Prometheus server (e.g. dcgm-exporter's DCGM metrics).

Blocking (`urllib`): it runs inside the forecast's worker thread, never on the event loop.
Every failure is an `UpstreamError` naming the server: unreachable (503 at the REST API), or
answering with an error (its own message passed on) or with something that is not its API (502).
"""

from __future__ import annotations

import json
import math
import re
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass

from .errors import UpstreamError

# Each GPU that did any work in the 10 minutes before: DCGM_FI_DEV_GPU_UTIL is in dcgm-exporter's
# default counters on every GPU model; max_over_time keeps a GPU that paused between scrapes;
# '> bool 0' makes an idle GPU 0, so an idle cluster reads 0 rather than no data.
DEFAULT_QUERY = "sum(max_over_time(DCGM_FI_DEV_GPU_UTIL[10m]) > bool 0)"
MAX_POINTS = 11_000  # Prometheus refuses range queries of more points per series than this
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class PrometheusSource:
    """Where the `gpu_busy` series comes from. No `url`: that series is off."""

    url: str = ""
    query: str = DEFAULT_QUERY  # PromQL for the GPUs busy, evaluated every 10 minutes; its series are summed
    tenant_query: str = ""  # the same for one tenant, with {tenant} in it; "": no per-tenant series


def query_range(
    url: str,
    query: str,
    start: float,
    end: float,
    step_s: float,
    max_points: int = MAX_POINTS,
    timeout_s: float = TIMEOUT_S,
) -> tuple[list[float], list[float]]:
    """Evaluate PromQL `query` at start, start + step_s, ... <= end; return (epoch seconds,
    values), the values of all the series it returns summed per time. Times where no series
    has a value are left out (`core.forecast.regularize` makes them NaN buckets). Windows
    of more than `max_points` steps are asked for in pieces."""
    totals: dict[float, float] = defaultdict(float)
    chunk_start = start
    while chunk_start <= end:
        chunk_end = min(end, chunk_start + (max_points - 1) * step_s)
        for series in _matrix(url, query, chunk_start, chunk_end, step_s, timeout_s):
            for t, v in series.get("values", []):
                value = float(v)  # Prometheus sends numbers as strings ("NaN", "+Inf" too)
                if math.isfinite(value):
                    totals[float(t)] += value
        chunk_start = chunk_end + step_s
    times = sorted(totals)
    return times, [totals[t] for t in times]


def query_value(url: str, query: str, at: float, timeout_s: float = TIMEOUT_S) -> float | None:
    """Evaluate PromQL `query` at time `at`; the sum of the series it returns, None when it returns none."""
    params = urllib.parse.urlencode({"query": query, "time": _num(at)})
    values = [
        float(series["value"][1])
        for series in _result(url, "query", params, query, "vector", timeout_s)
        if isinstance(series.get("value"), list) and len(series["value"]) == 2
    ]
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) if finite else None


def _matrix(url: str, query: str, start: float, end: float, step_s: float, timeout_s: float) -> list[dict]:
    params = urllib.parse.urlencode({"query": query, "start": _num(start), "end": _num(end), "step": _num(step_s)})
    return _result(url, "query_range", params, query, "matrix", timeout_s)


def _result(url: str, endpoint: str, params: str, query: str, kind: str, timeout_s: float) -> list[dict]:
    request = urllib.request.Request(
        f"{url.rstrip('/')}/api/v1/{endpoint}?{params}", headers={"Accept": "application/json"}
    )
    where = _shown(url)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()  # Prometheus explains a refusal in its JSON body
    except (urllib.error.URLError, OSError) as exc:  # refused, no route, DNS, timeout
        reason = getattr(exc, "reason", exc)
        raise UpstreamError(
            f"cannot reach Prometheus at {where}: {reason}", "prometheus_unreachable", unreachable=True
        ) from None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict) or body.get("status") not in ("success", "error"):
        raise UpstreamError(
            f"{where} answered HTTP {status} with something that is not the Prometheus API "
            f"({raw[:100].decode('utf-8', 'replace').strip()!r}); c.GPUSched.prometheus_url must be the server's base URL",
            "prometheus_error",
        )
    if body["status"] == "error":
        why = f"{body.get('errorType', 'error')}: {body.get('error', '')}"[:800]
        raise UpstreamError(f"Prometheus at {where} refused the query {query!r}: {why}", "prometheus_error")
    data = body.get("data") or {}
    if data.get("resultType") != kind:
        raise UpstreamError(
            f"Prometheus at {where} answered a {data.get('resultType')!r}, not a {kind}", "prometheus_error"
        )
    return data.get("result") or []


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def _shown(url: str) -> str:
    """The URL without user:password, fit for an error message."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def promql_regex(values: list[str]) -> str:
    """`values` as an exact-match alternation for `=~` (RE2 metacharacters escaped)."""
    return "|".join(re.sub(r"([\\.^$|?*+()\[\]{}])", r"\\\1", v) for v in values)


def promql_string(value: str) -> str:
    """`value` escaped for the inside of a double-quoted PromQL string (Go's escapes, as JSON's)."""
    return json.dumps(value, ensure_ascii=False)[1:-1]


def tenant_query(template: str, tenant: str) -> str:
    """`template` with every `{tenant}` replaced by the tenant name, escaped as a PromQL string
    (the template puts it inside double quotes, e.g. `{namespace="{tenant}"}`)."""
    return template.replace("{tenant}", promql_string(tenant))
