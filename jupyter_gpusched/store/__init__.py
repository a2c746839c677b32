"""Persistence: jobs, their events, and per-minute GPU demand history.

SQLAlchemy 2; SQLite (WAL) by default, any SQLAlchemy URL by config. The service writes
through this one repository class before it acknowledges anything, so a crash loses
nothing that a user was told about. Only one scheduler may own a store at a time (`claim`,
ownership.py); readers (tests, tools) need no claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, cast

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Table,
    Text,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from ..core.model import Event, Job, JobSpec, JobState, Priority
from .estimates import RuntimeStore
from .ownership import lock_for
from .schedules import ScheduleRow, ScheduleStore

SCHEMA_VERSION = 1


class Base(DeclarativeBase):
    pass


class JobRow(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, index=True)
    notebook: Mapped[str] = mapped_column(Text)
    gpus: Mapped[int] = mapped_column(Integer)
    priority: Mapped[int] = mapped_column(Integer)
    tenant: Mapped[str] = mapped_column(String(255), index=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)  # a JupyterHub user name: up to 255
    parameters: Mapped[dict] = mapped_column(JSON, default=dict)
    max_runtime: Mapped[float | None] = mapped_column(Float, nullable=True)
    preemptible: Mapped[bool] = mapped_column(Boolean, default=False)
    max_retries: Mapped[int] = mapped_column(Integer, default=2)
    gpu_type: Mapped[str | None] = mapped_column(String(64), nullable=True)
    checkpoint_interval: Mapped[float | None] = mapped_column(Float, nullable=True)
    cpus: Mapped[float | None] = mapped_column(Float, nullable=True)  # (added later: null in older stores)
    memory: Mapped[int | None] = mapped_column(Integer, nullable=True)
    interactive: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # a GPU kernel's request (added later)
    after: Mapped[list | None] = mapped_column(JSON, nullable=True)  # pipelines (core/dependencies.py)
    when: Mapped[str | None] = mapped_column(String(16), nullable=True)
    pipeline_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    schedule_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    submitted_at: Mapped[float] = mapped_column(Float)
    admitted_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    first_started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    finished_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    allocation: Mapped[list] = mapped_column(JSON, default=list)
    borrowed: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    lost_count: Mapped[int] = mapped_column(Integer, default=0)
    preemptions: Mapped[int] = mapped_column(Integer, default=0)
    attained_gpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    last_checkpoint_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    line_shift_s: Mapped[float | None] = mapped_column(Float, nullable=True)  # (added later: null in older stores)
    # Driver-side facts the core does not model (job folder, runner heartbeat, progress).
    info: Mapped[dict] = mapped_column(JSON, default=dict)


class EventRow(Base):
    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    time: Mapped[float] = mapped_column(Float)
    src: Mapped[str | None] = mapped_column(String(16), nullable=True)
    dst: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(255), default="")
    pool: Mapped[str | None] = mapped_column(String(255), nullable=True)  # on ADMITTED: where (budgets)


class UsageRow(Base):
    """GPUs requested (queued + running) and allocated per tenant, one row a minute."""

    __tablename__ = "usage"

    minute: Mapped[int] = mapped_column(Integer, primary_key=True)  # unix time // 60
    tenant: Mapped[str] = mapped_column(String(255), primary_key=True)
    requested: Mapped[int] = mapped_column(Integer)
    allocated: Mapped[int] = mapped_column(Integer)


class BudgetWarningRow(Base):
    """A tenant reached 80% or 100% of its budget: recorded once per period and level."""

    __tablename__ = "budget_warnings"

    tenant: Mapped[str] = mapped_column(String(255), primary_key=True)
    period: Mapped[str] = mapped_column(String(64), primary_key=True)
    level: Mapped[int] = mapped_column(Integer, primary_key=True)
    time: Mapped[float] = mapped_column(Float)
    message: Mapped[str] = mapped_column(Text, default="")


class UserSettingRow(Base):
    """A user's own settings (today: their default notification targets, docs/notifications.md)."""

    __tablename__ = "user_settings"

    user: Mapped[str] = mapped_column(String(255), primary_key=True)
    notify: Mapped[list | None] = mapped_column(JSON, nullable=True)


class MetaRow(Base):
    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


def _driver_url(url: str) -> str:
    """`postgresql://` / `postgres://` with the psycopg (3) driver we depend on, unless psycopg2 is there."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            try:
                import psycopg2  # noqa: F401
            except ImportError:
                return "postgresql+psycopg://" + url[len(scheme) :]
            return "postgresql://" + url[len(scheme) :]
    return url


def default_url(data_dir: str | Path) -> str:
    return f"sqlite:///{Path(data_dir) / 'gpusched.db'}"


def _job_values(job: Job, info: Mapping[str, Any] | None) -> dict[str, Any]:
    s = job.spec
    values = dict(
        id=job.id,
        seq=job.seq,
        notebook=s.notebook,
        gpus=s.gpus,
        priority=int(s.priority),
        tenant=s.tenant,
        owner=s.owner,
        parameters=dict(s.parameters),
        max_runtime=s.max_runtime,
        preemptible=s.preemptible,
        max_retries=s.max_retries,
        gpu_type=s.gpu_type,
        checkpoint_interval=s.checkpoint_interval,
        cpus=s.cpus,
        memory=s.memory,
        interactive=s.interactive,
        after=list(s.after),
        when=s.when,
        pipeline_id=s.pipeline_id,
        schedule_id=s.schedule_id,
        state=job.state.value,
        reason=job.reason,
        submitted_at=job.submitted_at,
        admitted_at=job.admitted_at,
        started_at=job.started_at,
        first_started_at=job.first_started_at,
        finished_at=job.finished_at,
        allocation=[[node, list(ids)] for node, ids in job.allocation],
        borrowed=job.borrowed,
        attempts=job.attempts,
        lost_count=job.lost_count,
        preemptions=job.preemptions,
        attained_gpu_s=job.attained_gpu_s,
        last_checkpoint_at=job.last_checkpoint_at,
        line_shift_s=job.line_shift_s,
    )
    if info is not None:
        values["info"] = dict(info)
    return values


def _job_from_row(row: JobRow) -> Job:
    spec = JobSpec(
        notebook=row.notebook,
        gpus=row.gpus,
        priority=Priority(row.priority),
        tenant=row.tenant,
        owner=row.owner,
        parameters=dict(row.parameters or {}),
        max_runtime=row.max_runtime,
        preemptible=row.preemptible,
        max_retries=row.max_retries,
        gpu_type=row.gpu_type,
        checkpoint_interval=row.checkpoint_interval,
        cpus=row.cpus or 0.0,
        memory=row.memory or 0,
        interactive=bool(row.interactive),
        after=tuple(row.after or ()),
        when=row.when or "succeeded",
        pipeline_id=row.pipeline_id,
        schedule_id=row.schedule_id,
    )
    return Job(
        id=row.id,
        spec=spec,
        submitted_at=row.submitted_at,
        seq=row.seq,
        state=JobState(row.state),
        allocation=tuple((node, tuple(ids)) for node, ids in (row.allocation or [])),
        borrowed=row.borrowed,
        admitted_at=row.admitted_at,
        started_at=row.started_at,
        first_started_at=row.first_started_at,
        finished_at=row.finished_at,
        attempts=row.attempts,
        lost_count=row.lost_count,
        preemptions=row.preemptions,
        attained_gpu_s=row.attained_gpu_s,
        last_checkpoint_at=row.last_checkpoint_at,
        line_shift_s=row.line_shift_s or 0.0,
        reason=row.reason or "",
    )


def _add_new_columns(engine: Any, rows: tuple[Any, ...] = (JobRow, EventRow)) -> None:
    """A store made by an earlier version lacks the nullable columns added since (create_all adds none to an
    existing table): add them, empty."""
    for row in rows:
        table = row.__tablename__
        have = {c["name"] for c in inspect(engine).get_columns(table)}
        missing = [c for c in row.__table__.columns if c.name not in have and c.nullable]
        with engine.begin() as conn:
            for column in missing:
                kind = column.type.compile(dialect=engine.dialect)
                conn.execute(text(f'ALTER TABLE {table} ADD COLUMN "{column.name}" {kind}'))


class Store:
    """The one repository: every read and write of persistent state goes through here."""

    def __init__(self, url: str):
        self.url = url
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///") :]).expanduser().parent.mkdir(parents=True, exist_ok=True)
        url = _driver_url(url)
        sqlite_url = url.startswith("sqlite")
        # A server database may restart under us: check pooled connections before use.
        self.engine = create_engine(url, future=True, **({} if sqlite_url else {"pool_pre_ping": True}))
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        Base.metadata.create_all(self.engine)
        _add_new_columns(self.engine)
        with Session(self.engine) as db, db.begin():
            if db.get(MetaRow, "schema_version") is None:
                db.add(MetaRow(key="schema_version", value=str(SCHEMA_VERSION)))
        self._lock: Any = None
        self.schedules = ScheduleStore(self.engine)  # recurring schedules, in the same database
        _add_new_columns(self.engine, (ScheduleRow,))
        self.runtimes = RuntimeStore(self.engine)  # the learned runtime history (core/estimates.py)

    # --- ownership: one scheduler per store -----------------------------------------------
    def claim(self, data_dir: str | Path | None = None) -> bool:
        """Try, without waiting, to become the one scheduler that owns this store (and `data_dir`)."""
        if self._lock is None:
            self._lock = lock_for(self.engine, self.url, Path(data_dir) if data_dir is not None else None)
        return bool(self._lock.try_acquire())

    def still_owned(self) -> bool:
        """Does this store's claim still hold (see ownership.py)?"""
        return self._lock is not None and bool(self._lock.held())

    def owner(self) -> tuple[str, str]:
        """After a failed claim: (who owns it, e.g. "pid 123", and what: a folder or the database URL)."""
        if self._lock is None:
            return "pid unknown", self.url
        return self._lock.owner(), self._lock.where()

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()

    def close(self) -> None:
        self.release()
        self.engine.dispose()

    # --- writes ---------------------------------------------------------------------
    def record(
        self,
        jobs: Iterable[Job] = (),
        events: Iterable[Event] = (),
        info: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Upsert jobs (with their driver info) and append events, in one transaction."""
        info = info or {}
        rows = [_job_values(j, info.get(j.id)) for j in jobs]
        ev = [
            dict(
                job_id=e.job_id,
                time=e.time,
                src=e.src.value if e.src else None,
                dst=e.dst.value,
                reason=e.reason,
                actor=e.actor,
                pool=e.pool,
            )
            for e in events
        ]
        if not rows and not ev:
            return
        with Session(self.engine) as db, db.begin():
            if rows:
                self._upsert(db, JobRow, rows, ["id"])
            if ev:
                db.execute(cast(Table, EventRow.__table__).insert(), ev)

    def set_info(self, job_id: str, info: Mapping[str, Any]) -> None:
        with Session(self.engine) as db, db.begin():
            row = db.get(JobRow, job_id)
            if row is not None:
                row.info = dict(info)

    def record_usage(self, minute: int, per_tenant: Mapping[str, tuple[int, int]]) -> None:
        rows = [dict(minute=minute, tenant=t, requested=r, allocated=a) for t, (r, a) in per_tenant.items()]
        if rows:
            with Session(self.engine) as db, db.begin():
                self._upsert(db, UsageRow, rows, ["minute", "tenant"])

    def _upsert(self, db: Session, model, rows: list[dict], keys: list[str]) -> None:
        dialect = self.engine.dialect.name
        if dialect in ("sqlite", "postgresql"):
            insert = (sqlite if dialect == "sqlite" else postgresql).insert
            stmt = insert(model)
            cols = {c: stmt.excluded[c] for c in rows[0] if c not in keys}
            db.execute(stmt.on_conflict_do_update(index_elements=keys, set_=cols), rows)
        else:  # portable fallback
            for r in rows:
                db.merge(model(**r))

    def set_user_notify(self, user: str, targets: list[dict[str, Any]] | None) -> None:
        """A user's default notification targets; None forgets them (the config's defaults apply again)."""
        with Session(self.engine) as db, db.begin():
            row = db.get(UserSettingRow, user)
            if row is None:
                db.add(UserSettingRow(user=user, notify=targets))
            else:
                row.notify = targets

    # --- reads ----------------------------------------------------------------------
    def user_notify(self, user: str) -> list[dict[str, Any]] | None:
        with Session(self.engine) as db:
            row = db.get(UserSettingRow, user)
            return None if row is None or row.notify is None else list(row.notify)

    def load_jobs(self) -> list[tuple[Job, dict]]:
        """Every job with its driver info, in submission order (for a restart)."""
        with Session(self.engine) as db:
            return [(_job_from_row(r), dict(r.info or {})) for r in db.scalars(select(JobRow).order_by(JobRow.seq))]

    def events(self, job_id: str) -> list[Event]:
        with Session(self.engine) as db:
            rows = db.scalars(select(EventRow).where(EventRow.job_id == job_id).order_by(EventRow.id))
            return [
                Event(r.job_id, r.time, JobState(r.src) if r.src else None, JobState(r.dst), r.reason, r.actor)
                for r in rows
            ]

    def held_events(self) -> list[tuple[Event, str, str, int]]:
        """Every event that starts or ends holding GPUs, in order, with its job's tenant, owner and
        GPUs: what budget accounting is rebuilt from when the service starts."""
        moves = [s.value for s in (JobState.ADMITTED, JobState.RUNNING)]
        q = (
            select(EventRow, JobRow.tenant, JobRow.owner, JobRow.gpus)
            .join(JobRow, JobRow.id == EventRow.job_id)
            .where((EventRow.dst == JobState.ADMITTED.value) | EventRow.src.in_(moves))
            .order_by(EventRow.id)
        )
        with Session(self.engine) as db:
            return [
                (
                    Event(
                        r.job_id, r.time, JobState(r.src) if r.src else None, JobState(r.dst), r.reason, r.actor, r.pool
                    ),
                    tenant,
                    owner,
                    gpus,
                )
                for r, tenant, owner, gpus in db.execute(q)
            ]

    def record_budget_warning(self, tenant: str, period: str, level: int, time: float, message: str) -> bool:
        """Record a budget warning unless this tenant, period and level has one; True if it is new."""
        with Session(self.engine) as db, db.begin():
            if db.get(BudgetWarningRow, (tenant, period, level)) is not None:
                return False
            db.add(BudgetWarningRow(tenant=tenant, period=period, level=level, time=time, message=message))
            return True

    def budget_warnings(self, tenant: str | None = None) -> list[dict[str, Any]]:
        q = select(BudgetWarningRow).order_by(BudgetWarningRow.time)
        if tenant is not None:
            q = q.where(BudgetWarningRow.tenant == tenant)
        with Session(self.engine) as db:
            return [
                dict(tenant=r.tenant, period=r.period, level=r.level, time=r.time, message=r.message)
                for r in db.scalars(q)
            ]

    def count_jobs(self) -> int:
        with Session(self.engine) as db:
            return db.scalar(select(func.count()).select_from(JobRow)) or 0

    def usage(self, tenant: str | None = None, since_minute: int | None = None) -> list[tuple[int, str, int, int]]:
        """(minute, tenant, requested, allocated) rows in time order."""
        q = select(UsageRow)
        if tenant is not None:
            q = q.where(UsageRow.tenant == tenant)
        if since_minute is not None:
            q = q.where(UsageRow.minute >= since_minute)
        with Session(self.engine) as db:
            return [
                (r.minute, r.tenant, r.requested, r.allocated)
                for r in db.scalars(q.order_by(UsageRow.minute, UsageRow.tenant))
            ]


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")  # readers never block the writer
    cur.execute("PRAGMA synchronous=NORMAL")  # durable at each commit under WAL, bar power loss
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()
