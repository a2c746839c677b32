"""GET /gpusched/api/forecast?series=gpu_busy against a real Prometheus server (Debian's
`prometheus` 2.42; scripts/ci-prometheus-deps.sh installs it) holding a week of synthetic
dcgm-exporter samples backfilled with `promtool tsdb create-blocks-from openmetrics`."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from test_openapi import check

from jupyter_gpusched.server.app import GPUSched
from jupyter_gpusched.service import prometheus
from jupyter_gpusched.service.errors import UpstreamError
from jupyter_gpusched.testing.net import free_port
from jupyter_gpusched.testing.prometheus import backfilled_prometheus

pytestmark = pytest.mark.timeout(120)

PATH = "/gpusched/api/forecast"
STEP = 600
DAY = 86400
SAMPLE_EVERY_S = 60
SCRAPE_OFFSET_S = 15
BUSY_QUERY = "sum(max_over_time(DCGM_FI_DEV_GPU_UTIL[10m]) > bool 0)"
TENANT_QUERY = 'sum(max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="{tenant}"}[10m]) > bool 0)'
# Unescaped, this name would close the label matcher and add `or vector(99)` to the query.
INJECTING_TENANT = 'x"}[10m]) > bool 0) or vector(99) #'
TENANTS = {"vision": {"quota": 1}, "nlp": {"quota": 1}, INJECTING_TENANT: {"quota": 0}}


def busy_gpus(t: float, namespace: str | None = None) -> int:
    """The synthetic cluster: 'vision' (node-a) runs 4 GPUs from 08:00 to 18:00 UTC and 1
    otherwise; 'nlp' (node-b) always 2. Changes fall on the hour, so every 10-minute bucket
    has one value."""
    vision = 4 if 8 <= (t % DAY) // 3600 < 18 else 1
    return {"vision": vision, "nlp": 2, None: vision + 2}[namespace]


def openmetrics(start: int, end: int) -> str:
    """dcgm-exporter's DCGM_FI_DEV_GPU_UTIL for 2 nodes x 4 GPUs, scraped every minute at
    :15 (Prometheus 2's range selectors include both ends: a scrape exactly on a bucket
    boundary would count in both buckets)."""
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for t in range(start + SCRAPE_OFFSET_S, end + 1, SAMPLE_EVERY_S):
        for host, namespace in (("node-a", "vision"), ("node-b", "nlp")):
            busy = busy_gpus(t, namespace)
            for gpu in range(4):
                util = 35 + (t // 60 * 7 + gpu * 13) % 60 if gpu < busy else 0
                labels = f'gpu="{gpu}",UUID="GPU-{host}-{gpu}",Hostname="{host}",modelName="NVIDIA A100",namespace="{namespace}"'
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util} {t}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass
class Prometheus:
    url: str
    data_end: int  # samples up to this time


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    """A real Prometheus on a free port, its TSDB backfilled with the last week of samples."""
    data_end = int(time.time()) // 60 * 60
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics(data_end - 7 * DAY, data_end)) as url:
        yield Prometheus(url, data_end)


@pytest.fixture
def gpusched_config(request):
    """Prometheus configured with the default busy-GPU query and a per-namespace tenant
    query; a test overrides keys with `@pytest.mark.parametrize("gpusched_config", [{...}],
    indirect=True)` (giving prometheus_url itself keeps the real server out of it)."""
    overrides = dict(getattr(request, "param", {}))
    url = overrides.pop("prometheus_url", None)
    if url is None:
        url = request.getfixturevalue("prom").url
    return {"tenants": TENANTS, "prometheus_url": url, "prometheus_tenant_query": TENANT_QUERY, **overrides}


def epoch(iso_time: str) -> float:
    return datetime.fromisoformat(iso_time).timestamp()


async def test_gpu_busy_history_is_what_prometheus_holds(api, prom):
    # seasonal-naive repeats the recorded day exactly: every bucket of the history, in place
    asked_at = time.time()
    code, fc = await api("GET", "forecast", series="gpu_busy", model="seasonal-naive", horizon="1440")
    assert code == 200, fc
    check(PATH, "GET", 200, fc)
    assert fc["source"] == "prometheus" and fc["series"] == "gpu_busy" and fc["tenant"] is None
    assert fc["model"] == "seasonal-naive" and len(fc["values"]) == 144
    assert 7 * 144 - 1 <= fc["history_points"] <= 7 * 144 + 1  # a week of 10-minute buckets
    times = [epoch(t) for t in fc["times"]]
    assert times[0] in (asked_at // STEP * STEP, time.time() // STEP * STEP)  # starts with the bucket now running
    assert fc["values"] == [busy_gpus(t) for t in times]

    code, last = await api("GET", "forecast", series="gpu_busy", model="last-value", horizon="60")
    assert code == 200 and last["values"] == [busy_gpus(times[0] - STEP)] * 6  # the last bucket observed


async def test_gpu_busy_selection_sees_the_daily_pattern(api):
    code, fc = await api("GET", "forecast", series="gpu_busy", horizon="1440")
    assert code == 200, fc
    check(PATH, "GET", 200, fc)
    # a strong daily shape: a seasonal model beats "demand stays where it is" and is served
    assert fc["model"] in ("seasonal-naive", "prophet-ar", "ensemble"), fc["note"]
    assert fc["skill"] is not None and fc["source"] == "prometheus"
    assert all(lo <= v <= hi for lo, v, hi in zip(fc["lower"], fc["values"], fc["upper"], strict=True))
    by_hour = {True: [], False: []}
    for t, v in zip(fc["times"], fc["values"], strict=True):
        by_hour[8 <= datetime.fromisoformat(t).hour < 18].append(v)
    day, night = (sum(v) / len(v) for v in (by_hour[True], by_hour[False]))
    assert 5 < day < 7 and 2 < night < 4, (day, night)  # 6 busy GPUs by day, 3 by night

    code, store = await api("GET", "forecast", horizon="60")
    assert code == 200 and store["source"] == "store" and store["series"] == "requested"


async def test_gpu_busy_per_tenant(api):
    times = None
    for tenant in ("vision", "nlp"):
        code, fc = await api(
            "GET", "forecast", series="gpu_busy", tenant=tenant, model="seasonal-naive", horizon="1440"
        )
        assert code == 200, fc
        assert fc["tenant"] == tenant and fc["source"] == "prometheus"
        times = [epoch(t) for t in fc["times"]]
        assert fc["values"] == [busy_gpus(t, tenant) for t in times]
    code, err = await api("GET", "forecast", series="gpu_busy", tenant="nobody")
    assert code == 404 and err["field"] == "tenant" and "known tenants" in err["message"]


async def test_a_tenant_name_cannot_inject_promql(api):
    code, fc = await api("GET", "forecast", series="gpu_busy", tenant=INJECTING_TENANT, model="last-value")
    assert code == 200, fc
    # the name stays inside the label matcher's string: no such namespace, no data (not 99s)
    assert fc["model"] is None and fc["values"] == [] and "no samples" in fc["note"]


def test_tenant_names_are_escaped_as_promql_strings():
    assert prometheus.tenant_query(TENANT_QUERY, 'a"b\\c') == (
        'sum(max_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="a\\"b\\\\c"}[10m]) > bool 0)'
    )


@pytest.mark.parametrize("gpusched_config", [{"prometheus_url": ""}], indirect=True)
async def test_unconfigured_is_400_saying_how_to_configure(api):
    code, err = await api("GET", "forecast", series="gpu_busy")
    assert code == 400, err
    check(PATH, "GET", 400, err)
    assert err["field"] == "series" and "c.GPUSched.prometheus_url" in err["message"]


@pytest.mark.parametrize("gpusched_config", [{"prometheus_tenant_query": ""}], indirect=True)
async def test_tenant_without_tenant_query_is_400(api):
    code, err = await api("GET", "forecast", series="gpu_busy", tenant="vision")
    assert code == 400 and err["field"] == "tenant" and "prometheus_tenant_query" in err["message"]


DOWN_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize("gpusched_config", [{"prometheus_url": DOWN_URL}], indirect=True)
async def test_prometheus_down_is_503_naming_it(api):
    code, err = await api("GET", "forecast", series="gpu_busy")
    assert code == 503, err
    check(PATH, "GET", 503, err)
    assert err["error"] == "prometheus_unreachable" and DOWN_URL in err["message"], err


@pytest.mark.parametrize("gpusched_config", [{"prometheus_query": "sum(rate(DCGM_FI_DEV_GPU_UTIL[10m]"}], indirect=True)
async def test_bad_promql_is_502_with_prometheus_error(api, prom, jp_serverapp):
    code, err = await api("GET", "forecast", series="gpu_busy")
    assert code == 502, err
    check(PATH, "GET", 502, err)
    assert err["error"] == "prometheus_error" and "parse error" in err["message"] and prom.url in err["message"], err
    code, again = await api("GET", "forecast", series="gpu_busy")
    assert (
        code == 502 and jp_serverapp.web_app.settings["gpusched"].service.forecasts.cache.fits == 2
    )  # failures are not cached


def test_a_url_that_is_not_prometheus_is_502(prom):
    with pytest.raises(UpstreamError) as refused:
        prometheus.query_range(f"{prom.url}/not-here", BUSY_QUERY, 0, STEP, STEP)
    assert refused.value.status == 502 and "not the Prometheus API" in refused.value.message


def test_long_windows_are_asked_for_in_pieces(prom):
    end = prom.data_end // STEP * STEP
    whole = prometheus.query_range(prom.url, BUSY_QUERY, end - DAY, end, STEP)
    assert len(whole[0]) == 145 and whole[1] == [busy_gpus(t - STEP) for t in whole[0]]
    assert prometheus.query_range(prom.url, BUSY_QUERY, end - DAY, end, STEP, max_points=50) == whole
    # 80 days at 10 minutes is 11,521 points: Prometheus refuses that in one piece
    with pytest.raises(UpstreamError, match="11,000 points"):
        prometheus.query_range(prom.url, BUSY_QUERY, end - 80 * DAY, end, STEP, max_points=20_000)
    times, values = prometheus.query_range(prom.url, BUSY_QUERY, end - 80 * DAY, end, STEP)
    assert 7 * 144 <= len(times) <= 7 * 144 + 2 and times[-1] == end


def test_prometheus_url_defaults_to_the_environment(monkeypatch):
    monkeypatch.setenv("GPUSCHED_PROMETHEUS_URL", "http://prometheus.example:9090")
    assert GPUSched().prometheus_url == "http://prometheus.example:9090"
    with pytest.raises(ValueError, match="tenant"):
        GPUSched(prometheus_tenant_query="sum(DCGM_FI_DEV_GPU_UTIL)")


def test_ci_script_is_quick_when_prometheus_is_there():
    script = Path(__file__).resolve().parents[1] / "scripts" / "ci-prometheus-deps.sh"
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus not installed")
    out = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30, check=True)
    assert "already installed" in out.stdout
