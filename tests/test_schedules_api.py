"""The schedules REST API on a real Jupyter server: create, list, pause/resume, edit, delete, runs,
preview, and 400s that read as POST jobs' (docs/schedules.md)."""

from __future__ import annotations

import pytest

from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(120)


async def test_create_list_pause_resume_edit_delete(api, jp_root_dir, service):
    make_notebook(jp_root_dir / "train.ipynb", "1 + 1", parameters="lr = 0.1")
    body = {
        "notebook": "train.ipynb",
        "cron": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "gpus": 2,
        "parameters": {"lr": 0.01},
        "max_runtime": 600,
    }
    code, sched = await api("POST", "schedules", body)
    assert code == 201, sched
    assert sched["cron"] == "0 2 * * *" and sched["timezone"] == "Europe/Berlin" and not sched["paused"]
    assert sched["next_run"] and sched["last_job"] is None
    assert sched["job"]["gpus"] == 2 and sched["job"]["parameters"] == {"lr": 0.01}
    assert sched["overlap"] == "skip" and sched["catch_up"] == "once"
    # 02:00 in Berlin is 01:00 UTC in winter
    assert sched["next_run"].endswith("T01:00:00.000+00:00")

    code, listed = await api("GET", "schedules")
    assert code == 200 and [s["id"] for s in listed["schedules"]] == [sched["id"]]

    code, paused = await api("PATCH", f"schedules/{sched['id']}", {"paused": True})
    assert code == 200 and paused["paused"] and paused["next_run"] is None
    code, resumed = await api("PATCH", f"schedules/{sched['id']}", {"paused": False, "cron": "30 3 * * 1"})
    assert code == 200 and not resumed["paused"] and resumed["cron"] == "30 3 * * 1"
    code, edited = await api("PATCH", f"schedules/{sched['id']}", {"gpus": 1, "priority": "high"})
    assert code == 200 and edited["job"]["gpus"] == 1 and edited["job"]["priority"] == "high"
    assert edited["job"]["parameters"] == {"lr": 0.01}  # fields left out stay

    code, runs = await api("GET", f"schedules/{sched['id']}/jobs")
    assert code == 200 and runs == {"jobs": [], "total": 0, "next_offset": None}

    code, gone = await api("DELETE", f"schedules/{sched['id']}")
    assert code == 200
    code, err = await api("GET", f"schedules/{sched['id']}")
    assert code == 404 and err["field"] == "id"


async def test_a_due_schedule_runs_a_job_listed_under_it(api, jp_root_dir, service):
    make_notebook(jp_root_dir / "nb.ipynb", "1 + 1")
    code, sched = await api("POST", "schedules", {"notebook": "nb.ipynb", "cron": "* * * * *"})
    assert code == 201
    # as if created a minute ago: the current minute's time is due (the tick fires it)
    service.schedules.store.update(sched["id"], created_at=service.clock() - 60)
    service.tick()
    code, runs = await api("GET", f"schedules/{sched['id']}/jobs")
    assert code == 200 and runs["total"] == 1
    job = runs["jobs"][0]
    assert job["schedule_id"] == sched["id"] and job["notebook"] == "nb.ipynb"
    code, again = await api("GET", f"schedules/{sched['id']}")
    assert again["last_job"] == job["id"] and again["last_state"] is not None


@pytest.mark.parametrize(
    "body, field, error",
    [
        ({"notebook": "nb.ipynb"}, "cron", "missing_field"),
        ({"notebook": "nb.ipynb", "cron": "61 * * * *"}, "cron", "invalid_value"),
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "timezone": "Mars/Olympus"}, "timezone", "invalid_value"),
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "overlap": "maybe"}, "overlap", "invalid_value"),
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "catch_up": 3}, "catch_up", "wrong_type"),
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "gpus": 0}, "gpus", "invalid_value"),
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "bogus": 1}, "bogus", "unknown_field"),
        ({"notebook": "missing.ipynb", "cron": "0 2 * * *"}, "notebook", "not_found"),
        # refused when the schedule is made, not at each run
        ({"notebook": "nb.ipynb", "cron": "0 2 * * *", "notify": ["not an address"]}, "notify", "invalid_value"),
    ],
)
async def test_bad_schedules_get_400_as_post_jobs_gives_them(api, jp_root_dir, body, field, error):
    make_notebook(jp_root_dir / "nb.ipynb", "1 + 1")
    code, err = await api("POST", "schedules", body)
    assert code == 400, err
    assert err["field"] == field and err["error"] == error and err["message"]
    job_body = {k: v for k, v in body.items() if k not in ("cron", "timezone", "overlap", "catch_up")}
    if field not in ("cron", "timezone", "overlap", "catch_up"):
        assert await api("POST", "jobs", job_body) == (code, err)  # the same answer, word for word
    code, listed = await api("GET", "schedules")
    assert listed["schedules"] == []  # nothing changed


async def test_preview_describes_the_cron_and_its_next_runs(api):
    code, preview = await api("GET", "schedules/preview", cron="0 2 * * *", timezone="Europe/Berlin")
    assert code == 200
    assert "02:00" in preview["description"] and "Europe/Berlin" in preview["description"]
    assert len(preview["next_runs"]) == 5
    code, err = await api("GET", "schedules/preview", cron="nope")
    assert code == 400 and err["field"] == "cron"


async def test_the_forecast_knows_the_scheduled_runs_of_the_horizon(api, jp_root_dir):
    make_notebook(jp_root_dir / "nb.ipynb", "1 + 1")
    body = {"notebook": "nb.ipynb", "cron": "0 * * * *", "gpus": 2, "max_runtime": 1800}
    assert (await api("POST", "schedules", body))[0] == 201
    paused = dict(body, cron="30 * * * *", paused=True)  # a paused schedule is no demand
    assert (await api("POST", "schedules", paused))[0] == 201
    code, fc = await api("GET", "forecast", horizon="600")
    assert code == 200, fc
    known = fc["scheduled"]
    assert known["step_s"] == 600 and len(known["times"]) == 60
    assert len(known["runs"]) == 10 and {r["gpus"] for r in known["runs"]} == {2}
    series = known["gpus"]["default"]
    # the first run's bucket (not the first whole hour's: in the hour's first 10 minutes that is the current
    # bucket, whose run is already past)
    first = known["times"].index(known["runs"][0]["time"])
    assert known["runs"][0]["time"][14:16] == "00"
    assert series[first : first + 3] == [2, 2, 2] and series[first + 3 : first + 6] == [0, 0, 0]  # 30 min each
    assert sum(series) <= 10 * 3 * 2 and max(series) == 2


async def test_a_bad_notify_target_is_refused_on_edit_too(api, jp_root_dir):
    make_notebook(jp_root_dir / "nb.ipynb", "1 + 1")
    code, sched = await api("POST", "schedules", {"notebook": "nb.ipynb", "cron": "0 2 * * *", "notify": []})
    assert code == 201 and sched["job"]["notify"] == []
    code, err = await api("PATCH", f"schedules/{sched['id']}", {"notify": ["ftp://nowhere"]})
    assert code == 400 and err["field"] == "notify", err
    code, same = await api("GET", f"schedules/{sched['id']}")
    assert same["job"]["notify"] == []  # unchanged
