"""A private PostgreSQL server for tests: Debian's ``postgresql`` binaries run a cluster of its own in a
temporary folder, on a free port; `create_database()` gives each test its own database."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import Unavailable
from .net import free_port


def postgres_bindir() -> Path | None:
    """Folder of initdb / pg_ctl / postgres, or None."""
    for name in ("pg_ctl",):
        found = shutil.which(name)
        if found and Path(found).resolve().with_name("initdb").exists():
            return Path(found).resolve().parent
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit() else 0,
    )
    for c in reversed(candidates):
        if (Path(c) / "initdb").exists() and (Path(c) / "pg_ctl").exists():
            return Path(c)
    return None


@dataclass
class PostgresServer:
    """A private PostgreSQL cluster. As root, it runs as the `postgres` system user."""

    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="gpusched-pg-")))
    port: int = field(default_factory=free_port)
    superuser: str = "postgres"
    bindir: Path | None = None
    _run_as: dict = field(default_factory=dict)

    def start(self, timeout: float = 60) -> PostgresServer:
        self.bindir = self.bindir or postgres_bindir()
        if self.bindir is None:
            shutil.rmtree(self.base, ignore_errors=True)
            raise Unavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's `postgresql` package "
                "(bash scripts/ci-hub-deps.sh)"
            )
        if os.geteuid() == 0:  # postgres refuses to run as root
            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self._run_as = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
        data = self.base / "data"
        self._run(
            [
                self.bindir / "initdb",
                "-D",
                data,
                "-A",
                "trust",
                "-U",
                self.superuser,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]
        )
        self._pg_ctl_start(data, timeout)
        return self

    def _run(self, cmd: Sequence[Any]) -> None:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=self.base, **self._run_as)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{Path(str(cmd[0])).name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}\n{self.log()}"
            )

    def log(self) -> str:
        try:
            return (self.base / "server.log").read_text()[-3000:]
        except OSError:
            return ""

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.superuser}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str | None = None) -> str:
        """A new empty database; its SQLAlchemy URL."""
        import psycopg

        name = name or f"gpusched_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={self.superuser} dbname=postgres", autocommit=True
        ) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _pg_ctl_start(self, data: Path, timeout: float) -> None:
        assert self.bindir is not None
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        log = self.base / "server.log"
        self._run(
            [self.bindir / "pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "-t", str(int(timeout)), "start"]
        )

    def restart(self, timeout: float = 60) -> None:
        """Stop the server abruptly (as a crash would) and start it again on the same port."""
        assert self.bindir is not None, "start() the server first"
        data = self.base / "data"
        self._run([self.bindir / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"])
        self._pg_ctl_start(data, timeout)

    def stop(self) -> None:
        if self.bindir is not None and (self.base / "data" / "postmaster.pid").exists():
            try:
                self._run([self.bindir / "pg_ctl", "-D", self.base / "data", "-m", "immediate", "-w", "stop"])
            except RuntimeError:
                pass
        shutil.rmtree(self.base, ignore_errors=True)
