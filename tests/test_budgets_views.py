"""What the user-facing budget views read: the report per day (`bucket=day`), over a real store and REST."""

from __future__ import annotations

import csv
import getpass
import io
from datetime import datetime, timezone

import pytest

from jupyter_gpusched.core import Event, JobState
from jupyter_gpusched.core.budget import Budget
from jupyter_gpusched.core.cost import PriceList
from jupyter_gpusched.service.budgets import Budgets
from jupyter_gpusched.store import Store, default_url
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import wait_for_state

pytestmark = pytest.mark.timeout(120)


def at(day: int, hour: int) -> float:
    return datetime(2026, 12, day, hour, tzinfo=timezone.utc).timestamp()


def test_report_by_day_splits_an_attempt_at_midnight(tmp_path):
    store = Store(default_url(tmp_path))
    budgets = Budgets({"vision": Budget(100)}, PriceList({"a100": 3.0}), store)
    # 2 GPUs from 1 Dec 22:00 to 2 Dec 01:00 (4 GPU-h on the 1st, 2 on the 2nd); 1 GPU on the 3rd, 09-10
    for job, gpus, start, end in (("j1", 2, at(1, 22), at(2, 1)), ("j2", 1, at(3, 9), at(3, 10))):
        budgets.ledger.add(
            Event(job, start, JobState.QUEUED, JobState.ADMITTED, pool="a100"), "vision", "al", gpus, "a100"
        )
        budgets.ledger.add(Event(job, end, JobState.RUNNING, JobState.SUCCEEDED), "vision", "al", gpus, None)
    report = budgets.report("month", "tenant", at(3, 12), bucket="day")
    assert [d["day"] for d in report["days"]] == ["2026-12-01", "2026-12-02", "2026-12-03"]  # up to today
    hours = [[r["gpu_hours"] for r in d["rows"]] for d in report["days"]]
    assert hours == [[4.0], [2.0], [1.0]]
    assert [d["rows"][0]["cost"] for d in report["days"]] == [12.0, 6.0, 3.0]
    assert report["days"][1]["start"] == at(2, 0)
    assert sum(h[0] for h in hours) == report["rows"][0]["gpu_hours"]  # the days add up to the period
    assert "days" not in budgets.report("month", "tenant", at(3, 12))  # only when asked
    store.close()


@pytest.fixture
def gpusched_config():
    return {
        "tenants": {"vision": {"quota": 2, "budget": {"money": 50, "period": "month"}}},
        "pools": {"local": {"price_per_gpu_hour": 2.5}},
        "user_tenants": {getpass.getuser(): "vision"},
    }


async def test_report_bucket_day_over_rest_json_and_csv(api, service, jp_root_dir):
    make_notebook(jp_root_dir / "nb.ipynb", "import time; time.sleep(1)")
    job = service.submit(notebook="nb.ipynb", owner=getpass.getuser(), tenant="vision")
    await wait_for_state(api, job.id, {"SUCCEEDED"})
    code, report = await api("GET", "usage/report", by="user", bucket="day")
    assert code == 200
    today = report["days"][-1]
    assert today["day"] == datetime.now(timezone.utc).strftime("%Y-%m-%d")
    assert [r["user"] for r in today["rows"]] == [getpass.getuser()]
    assert today["rows"][0]["gpu_hours"] == report["rows"][0]["gpu_hours"] > 0
    assert all(d["rows"] == [] for d in report["days"][:-1])  # nothing spent before today
    code, text = await api("GET", "usage/report", by="user", bucket="day", format="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["period"], r["user"]) for r in rows] == [(today["day"], getpass.getuser())]
    code, err = await api("GET", "usage/report", bucket="hour")
    assert code == 400 and err["field"] == "bucket"
