"""Recurring schedules in the live service (virtual clock, real store, real local backend) and the
cron helper: a run each minute, never twice (also across a restart), catch-up, overlap, DST."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.core.cron import CronError, check_cron, next_runs, zone
from jupyter_gpusched.core.health import HealthConfig
from jupyter_gpusched.service import InvalidArgument
from jupyter_gpusched.service.schedules import run_job_id
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import run_until, service_in

pytestmark = pytest.mark.timeout(150)
BERLIN = ZoneInfo("Europe/Berlin")


class Clock:
    """Virtual time: starts 5 s past a whole minute; `advance` moves it on."""

    def __init__(self):
        self.now = float(int(datetime(2026, 12, 3, 10, 0, tzinfo=BERLIN).timestamp())) + 5

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def new_service(folder, clock):
    # The runner's heartbeats carry real time and the clock is virtual: no heartbeat or start deadline.
    health = HealthConfig(heartbeat_timeout=1e9, start_timeout=1e9)
    backend = LocalBackend(virtual_gpus=2, heartbeat_interval=0.5)
    return service_in(folder, backend, clock, health=health, memory_check_interval=0.0)


def stop(service):
    service.backend.close()
    service.store.close()


def runs(service, schedule_id):
    return sorted(service.schedules.jobs(schedule_id), key=lambda j: j.seq)


def test_next_run_is_dst_correct():
    spring = datetime(2026, 3, 27, 12, tzinfo=BERLIN).timestamp()
    local = [datetime.fromtimestamp(t, BERLIN) for t in next_runs("30 1 * * *", "Europe/Berlin", spring, 3)]
    assert [(d.hour, d.minute) for d in local] == [(1, 30)] * 3  # 01:30 local, every day
    assert [d.utcoffset().total_seconds() / 3600 for d in local] == [1, 1, 2]  # CET, CET, then CEST
    # 02:30 does not exist on 29 March: that day's run comes at 03:00 CEST
    local = [datetime.fromtimestamp(t, BERLIN) for t in next_runs("30 2 * * *", "Europe/Berlin", spring, 3)]
    assert [(d.day, d.hour, d.minute) for d in local] == [(28, 2, 30), (29, 3, 0), (30, 2, 30)]
    # 02:30 happens twice on 25 October: one run
    autumn = datetime(2026, 10, 24, 12, tzinfo=BERLIN).timestamp()
    times = next_runs("30 2 * * *", "Europe/Berlin", autumn, 2)
    assert times[1] - times[0] == 25 * 3600  # the 25-hour day, not a second run an hour later


def test_bad_cron_and_unknown_timezone_are_refused():
    for bad in ("", "61 * * * *", "* * * *", "every day", "* * * * * * *"):
        with pytest.raises(CronError) as err:
            check_cron(bad)
        assert err.value.field == "cron"
    for bad in ("Mars/Olympus", "", "../etc/passwd", "/etc/localtime"):
        with pytest.raises(CronError) as err:
            zone(bad)
        assert err.value.field == "timezone"
    assert check_cron(" 0  2 * * * ") == "0 2 * * *"


def test_every_minute_a_run_each_minute_and_none_twice_across_a_restart(tmp_path):
    clock = Clock()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(owner="me", notebook="nb.ipynb", cron="* * * * *", timezone="Europe/Berlin")
    service.tick()
    assert runs(service, row["id"]) == []  # created at :05: the first run is at the next whole minute
    for minute in (1, 2):
        clock.advance(60)
        service.tick()
        service.tick()  # the same minute again: no second run
        assert len(runs(service, row["id"])) == minute
        run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    assert [j.state for j in runs(service, row["id"])] == [JobState.SUCCEEDED] * 2
    first_slot = clock.now - 5 - 60
    assert runs(service, row["id"])[0].id == run_job_id(row["id"], first_slot)
    # The server stops just after it submitted the next minute's run, before it recorded the slot.
    clock.advance(60)
    slot = clock.now - 5
    service.submit(owner="me", notebook="nb.ipynb", schedule_id=row["id"], job_id=run_job_id(row["id"], slot))
    stop(service)

    service = new_service(tmp_path, clock)  # a restart, in the same minute
    service.tick()
    service.tick()
    assert len(runs(service, row["id"])) == 3  # that minute's run once, not again
    assert service.schedules.get(row["id"])["last_run_at"] == slot
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    clock.advance(60)
    service.tick()
    assert len(runs(service, row["id"])) == 4
    run_until(service, lambda: all(j.state.terminal for j in runs(service, row["id"])))
    assert len({j.id for j in runs(service, row["id"])}) == 4
    stop(service)


@pytest.mark.parametrize("catch_up", ["once", "skip"])
def test_runs_missed_while_down_follow_catch_up(tmp_path, catch_up):
    clock = Clock()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(
        owner="me", notebook="nb.ipynb", cron="*/2 * * * *", catch_up=catch_up, overlap="queue"
    )
    stop(service)
    clock.advance(10 * 60)  # down for 10 minutes: 5 scheduled times missed
    service = new_service(tmp_path, clock)
    service.tick()
    service.tick()
    fired = runs(service, row["id"])
    after = service.schedules.get(row["id"])
    assert len(fired) == (1 if catch_up == "once" else 0)
    assert "5 missed" in after["note"]
    assert after["last_run_at"] == clock.now - 5  # the latest missed time: the next one counts from there
    clock.advance(120)
    service.tick()  # the next scheduled time runs as usual
    assert len(runs(service, row["id"])) == len(fired) + 1
    stop(service)


@pytest.mark.parametrize("overlap", ["skip", "queue"])
def test_previous_run_still_queued_follows_overlap(tmp_path, overlap):
    clock = Clock()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(owner="me", notebook="nb.ipynb", cron="* * * * *", overlap=overlap)
    for _ in range(2):
        clock.advance(60)
        service.schedules.fire_due(clock.now)  # fire only, no scheduling pass: each run stays QUEUED
    fired = runs(service, row["id"])
    assert [j.state for j in fired] == [JobState.QUEUED] * (1 if overlap == "skip" else 2)
    note = service.schedules.get(row["id"])["note"]
    assert (f"run {fired[0].id} is still QUEUED" in note) == (overlap == "skip")
    stop(service)


def test_pause_resume_and_edit(tmp_path):
    clock = Clock()
    make_notebook(tmp_path / "root" / "nb.ipynb", "1 + 1")
    service = new_service(tmp_path, clock)
    row = service.schedules.create(owner="me", notebook="nb.ipynb", cron="* * * * *", paused=True)
    assert service.schedules.next_run(row) is None
    clock.advance(300)
    service.schedules.fire_due(clock.now)
    assert runs(service, row["id"]) == []
    row = service.schedules.update(row["id"], paused=False)  # counts from now: the paused minutes do not run
    service.schedules.fire_due(clock.now)
    assert runs(service, row["id"]) == []
    assert service.schedules.next_run(row) == clock.now + 55
    with pytest.raises(InvalidArgument) as err:
        service.schedules.update(row["id"], timezone="Nowhere/Land")
    assert err.value.field == "timezone"
    with pytest.raises(InvalidArgument):
        service.schedules.update(row["id"], overlap="sometimes")
    stop(service)
