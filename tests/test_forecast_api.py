"""GET /gpusched/api/forecast on a real Jupyter server (pytest-jupyter): the shape the
ForecastChart widget draws, fallbacks on a fresh server, the model selected by backtest
with its skill on real history written into the service's store, caching, fits off the
event loop, bad input."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest
from sqlalchemy import insert
from sqlalchemy.orm import Session
from test_openapi import check

from jupyter_gpusched.store import UsageRow

from conftest import TRACES

pytestmark = pytest.mark.timeout(120)

HELIOS_VC = TRACES / "sensetime_helios_2020" / "earth_vcs" / "vc6YE_cluster_sequence_vc.csv.gz"
PATH = "/gpusched/api/forecast"


def seed(service, days: float) -> None:
    """`days` of real per-minute demand (Helios vc6YE), ending a minute ago, in the store."""
    import pandas as pd

    if not HELIOS_VC.is_file():
        pytest.skip(f"real series not found: {HELIOS_VC}")
    df = pd.read_csv(HELIOS_VC, usecols=["running_gpu_num", "pending_gpu_num"], nrows=int(days * 1440))
    end = int(service.clock() // 60) - 1
    rows = [
        {"minute": end - len(df) + 1 + i, "tenant": "default", "requested": int(r + p), "allocated": int(r)}
        for i, (r, p) in enumerate(zip(df["running_gpu_num"], df["pending_gpu_num"], strict=True))
    ]
    with Session(service.store.engine) as db, db.begin():
        db.execute(insert(UsageRow), rows)


async def test_fresh_server_falls_back_and_says_so(api):
    code, fc = await api("GET", "forecast", horizon="60")
    assert code == 200, fc
    check(PATH, "GET", 200, fc)
    # a fresh server has a minute or two of (constant) history, or none yet
    assert fc["model"] in (None, "mean"), fc
    assert fc["skill"] is None and fc["note"]
    if fc["model"] == "mean":
        assert len(fc["times"]) == len(fc["values"]) == len(fc["lower"]) == len(fc["upper"]) == 6
        datetime.fromisoformat(fc["times"][0])  # what the ForecastChart widget parses


async def test_selected_model_with_skill_on_real_history(api, service):
    seed(service, 8)
    t0 = time.monotonic()
    code, fc = await api("GET", "forecast", horizon="60")
    first = time.monotonic() - t0
    assert code == 200, fc
    check(PATH, "GET", 200, fc)
    sel = fc["skill"]["selection"]
    assert fc["model"] == sel["model"] and fc["note"].startswith("selected ") and "backtest MASE" in fc["note"]
    assert set(sel["baselines"]) == {"seasonal-naive", "last-value"}
    assert len(fc["times"]) == 6 and fc["horizon_minutes"] == 60 and fc["series"] == "requested"
    times = [datetime.fromisoformat(t) for t in fc["times"]]
    assert all((b - a).total_seconds() == 600 for a, b in zip(times, times[1:], strict=False))
    assert all(lo <= v <= hi for lo, v, hi in zip(fc["lower"], fc["values"], fc["upper"], strict=True))
    names = list(fc["skill"]["models"])
    assert names[0] == fc["model"] and {"seasonal-naive", "last-value", "latest", "ets"} <= set(names)
    assert "prophet-ar" not in names  # 8 days: Prophet joins the candidates once they fit on two weeks
    assert all(m["mase"] is not None for m in fc["skill"]["models"].values())
    assert first < 30

    code, again = await api("GET", "forecast", horizon="60")
    assert again["values"] == fc["values"] and again["fitted_at"] == fc["fitted_at"]  # cached

    code, alloc = await api("GET", "forecast", horizon="1440", series="allocated", tenant="default")
    assert (
        code == 200 and alloc["series"] == "allocated" and alloc["tenant"] == "default" and len(alloc["values"]) == 144
    )


async def test_fits_run_off_the_event_loop_and_are_shared(api, service, jp_serverapp):
    seed(service, 8)
    fc_task = asyncio.ensure_future(api("GET", "forecast", horizon="720", model="prophet"))
    twin = asyncio.ensure_future(api("GET", "forecast", horizon="720", model="prophet"))
    await asyncio.sleep(0.05)
    cluster_task = asyncio.ensure_future(api("GET", "cluster"))
    done, _ = await asyncio.wait({fc_task, cluster_task}, return_when=asyncio.FIRST_COMPLETED)
    assert cluster_task in done and not fc_task.done(), "the server answered while Prophet was fitting"
    (c1, a), (c2, b) = await fc_task, await twin
    assert c1 == c2 == 200 and a["values"] == b["values"] and a["model"] == "prophet"
    assert service.forecasts.cache.fits == 1  # two requests, one fit


async def test_bad_input_is_refused_clearly(api):
    for params, field in (
        ({"horizon": "0"}, "horizon"),
        ({"horizon": "soon"}, "horizon"),
        ({"series": "used"}, "series"),
        ({"model": "magic"}, "model"),
    ):
        code, err = await api("GET", "forecast", **params)
        assert code == 400, (params, err)
        check(PATH, "GET", 400, err)
        assert err["field"] == field and err["message"]
    code, err = await api("GET", "forecast", tenant="nobody")
    assert code == 404 and err["field"] == "tenant" and "known tenants" in err["message"]
