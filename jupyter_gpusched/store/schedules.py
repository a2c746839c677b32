"""Persistence of recurring schedules (service/schedules.py fires them), in the jobs' database.

One row per schedule: who owns it, what each run is (notebook + job fields), when (cron + time
zone), and how far it got (`last_run_at`: the scheduled time last fired or skipped; `last_job`). A pipeline schedule keeps its
steps and edges in `pipeline` (its `notebook` is empty, `job` unused) and `last_job` is the last run's
pipeline id.
Each run is an ordinary job whose `schedule_id` column names its schedule; its id is derived from
(schedule, scheduled time), so a run is never submitted twice, also across a restart.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Boolean, Float, String, Text, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class ScheduleBase(DeclarativeBase):
    pass


class ScheduleRow(ScheduleBase):
    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    tenant: Mapped[str | None] = mapped_column(String(255), nullable=True)
    notebook: Mapped[str] = mapped_column(Text)
    cron: Mapped[str] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64))
    job: Mapped[dict] = mapped_column(JSON, default=dict)  # the other job fields, as POST jobs takes them
    # a pipeline schedule's {"steps": [job fields...], "edges": [[from, to]...]} instead of notebook + job
    pipeline: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    overlap: Mapped[str] = mapped_column(String(8), default="skip")  # "skip" | "queue"
    catch_up: Mapped[str] = mapped_column(String(8), default="once")  # "once" | "skip"
    created_at: Mapped[float] = mapped_column(Float)
    last_run_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_job: Mapped[str | None] = mapped_column(String(64), nullable=True)
    note: Mapped[str] = mapped_column(Text, default="")  # what happened at the last scheduled time


COLUMNS = [c.name for c in ScheduleRow.__table__.columns]


def _as_dict(row: ScheduleRow) -> dict[str, Any]:
    out = {name: getattr(row, name) for name in COLUMNS}
    out["job"] = dict(out["job"] or {})
    return out


class ScheduleStore:
    """Reads and writes of the schedules table; each call is one transaction."""

    def __init__(self, engine: Any):
        self.engine = engine
        ScheduleBase.metadata.create_all(engine)

    def add(self, values: dict[str, Any]) -> dict[str, Any]:
        with Session(self.engine) as db, db.begin():
            row = ScheduleRow(**values)
            db.add(row)
            db.flush()
            return _as_dict(row)

    def get(self, schedule_id: str) -> dict[str, Any] | None:
        with Session(self.engine) as db:
            row = db.get(ScheduleRow, schedule_id)
            return _as_dict(row) if row is not None else None

    def all(self, owner: str | None = None) -> list[dict[str, Any]]:
        q = select(ScheduleRow).order_by(ScheduleRow.created_at, ScheduleRow.id)
        if owner is not None:
            q = q.where(ScheduleRow.owner == owner)
        with Session(self.engine) as db:
            return [_as_dict(r) for r in db.scalars(q)]

    def update(self, schedule_id: str, **values: Any) -> dict[str, Any] | None:
        with Session(self.engine) as db, db.begin():
            row = db.get(ScheduleRow, schedule_id)
            if row is None:
                return None
            for name, value in values.items():
                setattr(row, name, value)
            db.flush()
            return _as_dict(row)

    def delete(self, schedule_id: str) -> bool:
        with Session(self.engine) as db, db.begin():
            row = db.get(ScheduleRow, schedule_id)
            if row is None:
                return False
            db.delete(row)
            return True
