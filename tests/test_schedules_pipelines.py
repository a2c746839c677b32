"""Schedules that run a pipeline: the whole DAG once per scheduled time, never twice (also across a
restart), overlap judged on the previous run's steps (service, virtual clock) and the REST API's
checks, which read as POST pipelines' (docs/schedules.md, "A pipeline on a schedule")."""

from __future__ import annotations

import pytest
from test_openapi import check
from test_schedules import Clock, new_service, runs, stop
from test_schedules_cli import run_cli

from jupyter_gpusched.client import Client, GPUSchedError
from jupyter_gpusched.core import JobState
from jupyter_gpusched.service import InvalidArgument
from jupyter_gpusched.service.pipelines import step_job_id
from jupyter_gpusched.service.schedules import run_job_id
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import run_until

pytestmark = pytest.mark.timeout(150)

# prep -> (train, evaluate) -> report
DAG = {
    "steps": [{"notebook": f"{name}.ipynb"} for name in ("prep", "train", "evaluate", "report")],
    "edges": [[0, 1], [0, 2], [1, 3], [2, 3]],
}


def notebooks(root):
    for name in ("prep", "train", "evaluate", "report"):
        make_notebook(root / f"{name}.ipynb", "1 + 1")


def test_a_pipeline_schedule_fires_the_whole_dag_once_per_slot_and_not_twice_across_a_restart(tmp_path):
    clock = Clock()
    notebooks(tmp_path / "root")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(owner="me", pipeline=DAG, cron="* * * * *", timezone="Europe/Berlin")
    clock.advance(60)
    service.tick()
    service.tick()  # the same minute again: no second run
    steps = runs(service, row["id"])
    slot = clock.now - 5
    run_id = run_job_id(row["id"], slot)
    assert [j.id for j in steps] == [step_job_id(run_id, i) for i in range(4)]
    assert {j.spec.pipeline_id for j in steps} == {run_id}
    assert [j.spec.notebook for j in steps] == [s["notebook"] for s in DAG["steps"]]
    assert steps[3].spec.after == (steps[1].id, steps[2].id)  # the edges hold in each run
    assert service.schedules.get(row["id"])["last_job"] == run_id
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    assert [j.state for j in runs(service, row["id"])] == [JobState.SUCCEEDED] * 4

    # The server stops just after it submitted the next minute's pipeline, before it recorded the slot.
    clock.advance(60)
    slot = clock.now - 5
    service.submit_pipeline(
        [dict(s, schedule_id=row["id"]) for s in DAG["steps"]],
        DAG["edges"],
        owner="me",
        pipeline_id=run_job_id(row["id"], slot),
    )
    stop(service)

    service = new_service(tmp_path, clock)  # a restart, in the same minute
    service.tick()
    service.tick()
    assert len(runs(service, row["id"])) == 8  # that minute's pipeline once, not again
    assert service.schedules.get(row["id"])["last_run_at"] == slot
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    clock.advance(60)
    service.tick()
    assert len(runs(service, row["id"])) == 12
    assert len({j.id for j in runs(service, row["id"])}) == 12
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    stop(service)


def test_overlap_looks_at_every_step_of_the_previous_run(tmp_path):
    clock = Clock()
    notebooks(tmp_path / "root")
    make_notebook(tmp_path / "root" / "train.ipynb", "import time; time.sleep(120)")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(owner="me", pipeline=DAG, cron="* * * * *", overlap="skip")
    clock.advance(60)
    service.tick()
    prep, train = runs(service, row["id"])[:2]
    # The first step is done, a later one still running: the previous run is still going.
    run_until(service, lambda: prep.state.terminal and train.state is JobState.RUNNING)
    clock.advance(60)
    service.tick()
    assert len(runs(service, row["id"])) == 4
    assert service.schedules.get(row["id"])["note"] == f"skipped: run {train.id} is still RUNNING"
    for job in runs(service, row["id"]):
        if not job.state.terminal:
            service.cancel(job.id, actor="me")
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    stop(service)


def test_a_cyclic_or_malformed_pipeline_is_refused(tmp_path):
    service = new_service(tmp_path, Clock())
    with pytest.raises(InvalidArgument) as err:
        service.schedules.create(owner="me", pipeline=dict(DAG, edges=[[0, 1], [1, 0]]), cron="* * * * *")
    assert err.value.field == "pipeline.edges"
    with pytest.raises(InvalidArgument) as err:
        service.schedules.create(owner="me", notebook="x.ipynb", pipeline=DAG, cron="* * * * *")
    assert err.value.field == "pipeline"
    stop(service)


async def test_rest_a_pipeline_schedule_runs_its_steps_listed_under_it(api, jp_root_dir, service):
    notebooks(jp_root_dir)
    code, sched = await api("POST", "schedules", {"pipeline": DAG, "cron": "* * * * *"})
    assert code == 201, sched
    check("/gpusched/api/schedules", "POST", code, sched)
    assert sched["notebook"] == "" and sched["job"] == {} and sched["last_state"] is None
    assert [s["notebook"] for s in sched["pipeline"]["steps"]] == [s["notebook"] for s in DAG["steps"]]
    assert sched["pipeline"]["edges"] == DAG["edges"]
    service.schedules.store.update(sched["id"], created_at=service.clock() - 60)  # the current minute is due
    service.tick()
    service.tick()
    code, listed = await api("GET", f"schedules/{sched['id']}/jobs")
    assert code == 200 and listed["total"] == 4
    assert {j["schedule_id"] for j in listed["jobs"]} == {sched["id"]}
    code, again = await api("GET", f"schedules/{sched['id']}")
    check("/gpusched/api/schedules/{schedule_id}", "GET", code, again)
    assert {j["pipeline_id"] for j in listed["jobs"]} == {again["last_job"]}
    code, pipeline = await api("GET", f"pipelines/{again['last_job']}")
    assert code == 200 and pipeline["edges"] == DAG["edges"]
    assert again["last_state"] == pipeline["state"]
    # job fields beside a pipeline are refused: each step has its own
    code, err = await api("PATCH", f"schedules/{sched['id']}", {"gpus": 2})
    assert code == 400 and err["field"] == "gpus"
    code, edited = await api("PATCH", f"schedules/{sched['id']}", {"pipeline": {"steps": DAG["steps"][:1]}})
    assert code == 200 and len(edited["pipeline"]["steps"]) == 1 and edited["pipeline"]["edges"] == []


@pytest.mark.parametrize(
    "pipeline, field, error",
    [
        (dict(DAG, edges=[[0, 1], [1, 0]]), "pipeline.edges", "invalid_value"),
        (dict(DAG, edges=[[0, 9]]), "pipeline.edges", "invalid_value"),
        ({"steps": [], "edges": []}, "pipeline.steps", "invalid_value"),
        ({"steps": [{"notebook": "prep.ipynb", "gpus": 0}]}, "pipeline.steps[0].gpus", "invalid_value"),
        (
            {"steps": [{"notebook": "prep.ipynb"}, {"notebook": "missing.ipynb"}]},
            "pipeline.steps[1].notebook",
            "not_found",
        ),
        ({"steps": [{"notebook": "prep.ipynb", "after": ["x"]}]}, "pipeline.steps[0].after", "unknown_field"),
        ({"steps": [{"notebook": "prep.ipynb"}], "bogus": 1}, "pipeline", "invalid_value"),
    ],
)
async def test_rest_bad_pipeline_schedules_get_400_naming_the_field(api, jp_root_dir, pipeline, field, error):
    notebooks(jp_root_dir)
    code, err = await api("POST", "schedules", {"pipeline": pipeline, "cron": "0 2 * * *"})
    assert code == 400, err
    assert err["field"] == field and err["error"] == error and err["message"]
    code, listed = await api("GET", "schedules")
    assert listed["schedules"] == []  # nothing made


def test_cli_schedule_add_pipeline_file(live_server, monkeypatch):
    flows = live_server.root / "flows"
    notebooks(flows)
    (flows / "flow.yaml").write_text(
        "steps:\n  - notebook: prep.ipynb\n  - notebook: train.ipynb\n    gpus: 2\nedges: [[0, 1]]\n"
    )
    monkeypatch.chdir(live_server.root)
    added = run_cli(live_server, "schedule", "add", "--pipeline", "flows/flow.yaml", "--cron", "0 2 * * *")
    sid = added.split()[1].rstrip(":")
    assert added.startswith(f"schedule {sid}: 0 2 * * * (UTC), next run ")
    s = Client(live_server.url, live_server.token).schedule(sid)
    # notebook paths are relative to the file's folder, as for `pipeline run`
    assert [step["notebook"] for step in s["pipeline"]["steps"]] == ["flows/prep.ipynb", "flows/train.ipynb"]
    assert s["pipeline"]["steps"][1]["gpus"] == 2 and s["pipeline"]["edges"] == [[0, 1]]
    assert "pipeline of 2 steps" in run_cli(live_server, "schedule", "list")
    with pytest.raises(GPUSchedError) as err:  # job options belong to the file's steps
        run_cli(live_server, "schedule", "add", "--pipeline", "flows/flow.yaml", "--cron", "0 2 * * *", "--gpus", "2")
    assert err.value.field == "pipeline"
