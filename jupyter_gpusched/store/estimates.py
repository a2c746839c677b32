"""Persistence of the learned runtime history (core/estimates.py), in the jobs' database.

One row per history key: the key (its level and the owner, notebook, GPUs or tenant it names), its
last runs' times in seconds (oldest first) and when it was last updated, so a restart restores the
keys in the order the history evicts them. The service writes a key each time a finished job
updates it (service/estimates.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import JSON, Float, Text, delete, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column


class RuntimeBase(DeclarativeBase):
    pass


class RuntimeRow(RuntimeBase):
    __tablename__ = "runtime_history"

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    runs: Mapped[list] = mapped_column(JSON, default=list)  # seconds, oldest first
    updated_at: Mapped[float] = mapped_column(Float, index=True)


class RuntimeStore:
    """Reads and writes of the runtime_history table; each call is one transaction."""

    def __init__(self, engine) -> None:
        self.engine = engine
        RuntimeBase.metadata.create_all(engine)

    def save(self, keys: Iterable[tuple[str, list[float]]], now: float) -> None:
        with Session(self.engine) as db, db.begin():
            for key, runs in keys:
                row = db.get(RuntimeRow, key)
                if row is None:
                    db.add(RuntimeRow(key=key, runs=list(runs), updated_at=now))
                else:
                    row.runs, row.updated_at = list(runs), now

    def load(self, max_keys: int) -> list[tuple[str, list[float]]]:
        """The `max_keys` keys updated last, oldest first; older ones are deleted (the history dropped them)."""
        with Session(self.engine) as db, db.begin():
            count = db.scalar(select(func.count()).select_from(RuntimeRow)) or 0
            if count > max_keys:
                cut = db.scalars(
                    select(RuntimeRow.updated_at).order_by(RuntimeRow.updated_at.desc()).offset(max_keys - 1).limit(1)
                ).one()
                db.execute(delete(RuntimeRow).where(RuntimeRow.updated_at < cut))
            rows = db.scalars(select(RuntimeRow).order_by(RuntimeRow.updated_at, RuntimeRow.key))
            return [(r.key, [float(x) for x in r.runs or ()]) for r in rows][-max_keys:]
