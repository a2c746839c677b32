"""Only one scheduler may own a store: two would reap each other's jobs, run queued jobs twice and hand
out the same GPUs.

- Files (the data dir, and for SQLite the database's folder): an exclusive `flock` on `gpusched.lock`
  in each folder, held through an open file for the owner's life. The kernel drops it when the
  process dies, however it dies, so a restarted server takes over at once. The file holds the
  owner's pid and host, for the message the second process gives.
- PostgreSQL: a session-level advisory lock (`pg_try_advisory_lock`) on a connection of its own. It
  goes with the session, so a server that dies (or whose connection drops) frees it. The owner's
  pid and host are written to the store's `meta` table.

Both are tried without waiting; a second process that cannot get them waits as a standby and tries
again (the service's loop). `held()` says whether the owner still holds what it took (the lock file
was not removed under it; its database session is the same one).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

LOCK_FILE = "gpusched.lock"
OWNER_KEY = "scheduler_owner"  # in the meta table (PostgreSQL)
# One 64-bit advisory lock key for every jupyter-gpusched store (a database holds one store).
ADVISORY_KEY = int.from_bytes(hashlib.sha256(b"jupyter-gpusched scheduler").digest()[:8], "big", signed=True)


def _owner_text() -> str:
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()})


def describe_owner(raw: str | None) -> str:
    """'pid 123 on host h' from an owner record, or 'pid unknown' for an empty or unreadable one."""
    try:
        data = json.loads(raw or "")
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return "pid unknown"
    host = data.get("host")
    return f"pid {data['pid']}" + (f" on {host}" if host and host != socket.gethostname() else "")


class FileLocks:
    """Exclusive flocks on `gpusched.lock` in each of `folders`, all or none."""

    def __init__(self, folders: list[Path]):
        self.paths = sorted({(Path(f).expanduser().resolve() / LOCK_FILE) for f in folders})
        self._held: list[tuple[Path, IO[str]]] = []
        self.blocked_by: Path | None = None  # the lock file another process holds, after a failed try

    def try_acquire(self) -> bool:
        if self._held:
            return True
        held: list[tuple[Path, IO[str]]] = []
        for path in self.paths:  # one order everywhere: two processes never wait on each other in a circle
            path.parent.mkdir(parents=True, exist_ok=True)
            f = open(path, "a+", encoding="utf-8")  # not truncated before we own it: it names the owner
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                f.close()
                for _, g in held:
                    g.close()
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                self.blocked_by = path
                return False
            f.seek(0)
            f.truncate()
            f.write(_owner_text() + "\n")
            f.flush()
            held.append((path, f))
        self._held, self.blocked_by = held, None
        return True

    def owner(self) -> str:
        path = self.blocked_by or (self.paths[0] if self.paths else None)
        try:
            raw = path.read_text(encoding="utf-8") if path else ""
        except OSError:
            raw = ""
        return describe_owner(raw.strip())

    def where(self) -> str:
        return str((self.blocked_by or self.paths[0]).parent) if self.paths else "?"

    def held(self) -> bool:
        """Still ours: each lock file is the very file we locked (not removed or replaced under us)."""
        if not self._held:
            return False
        for path, f in self._held:
            try:
                if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                    return False
            except OSError:
                return False
        return True

    def release(self) -> None:
        for _, f in self._held:
            f.close()  # closing the last descriptor drops the flock
        self._held = []


class AdvisoryLock:
    """PostgreSQL: a session-level advisory lock on a connection kept for the owner's life."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._conn: Connection | None = None

    def _connect(self) -> Connection:
        return self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")

    def try_acquire(self) -> bool:
        if self._conn is not None:
            return True
        conn = self._connect()
        try:
            got = bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": ADVISORY_KEY}).scalar())
            if got:
                conn.execute(
                    text(
                        "INSERT INTO meta (key, value) VALUES (:k, :v) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                    ),
                    {"k": OWNER_KEY, "v": _owner_text()},
                )
        except Exception:
            conn.close()
            raise
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def owner(self) -> str:
        try:
            with self.engine.connect() as conn:
                raw = conn.execute(text("SELECT value FROM meta WHERE key = :k"), {"k": OWNER_KEY}).scalar()
        except Exception:
            raw = None
        return describe_owner(raw)

    def where(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def held(self) -> bool:
        """Our session answers (so its lock stands), or else we took the lock again on a new one. A database
        that cannot be reached at all counts as held: nobody else can take the lock from it either."""
        if self._conn is None:
            return False
        try:
            self._conn.execute(text("SELECT 1"))
            return True
        except Exception:
            self._drop()
        try:
            return self.try_acquire()
        except Exception:
            return True  # unreachable: try again on the next check

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                pass

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute(text("SELECT pg_advisory_unlock_all()"))
        except Exception:
            pass
        try:
            conn.close()
        except Exception:
            pass


def lock_for(engine: Engine, url: str, data_dir: Path | None) -> Any:
    """What makes one scheduler the owner of this store (and data dir): FileLocks or AdvisoryLock."""
    if engine.dialect.name == "postgresql":
        return AdvisoryLock(engine)
    folders = [Path(data_dir)] if data_dir is not None else []
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        folders.append(Path(str(engine.url.database)).expanduser().parent)
    return FileLocks(folders)
