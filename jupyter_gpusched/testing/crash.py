"""`kill -9` a real Jupyter server during a burst of submissions, again and again, then count.

Each round starts the server on the same data dir (the restart recovers what the last kill left),
submits jobs from a thread as fast as the server acknowledges them, and kills the server at one
point: a time after the burst began, or the moment a job first finishes in the round (its last
cell ran; the runner is writing its output and exit record). Every notebook's last cell appends
its job id to a file, so a job that runs to its end twice shows up twice. `settle` then restarts
the server once more, waits for every job to end and counts (`CrashCounts`).

Used by tests/test_crash.py (a few kill points) and benchmarks/crash_bench.py (more, as a table).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import requests

from ..core.model import TERMINAL_STATE_NAMES
from .jupyter import LiveServer, new_live_server
from .notebooks import make_notebook
from .waits import wait_until

FIRST_FINISH = "first job finishes"  # a kill point: the moment a job of this round has run its last cell
TERMINAL = TERMINAL_STATE_NAMES


@dataclass
class CrashCounts:
    kill_point: str
    acknowledged: int = 0  # submissions answered 201 (before each kill)
    present: int = 0  # acknowledged jobs the restarted server lists (each once)
    duplicates: int = 0  # ids listed more than once
    lost: int = 0  # acknowledged but not listed
    run_twice: int = 0  # jobs whose last cell ran more than once
    not_terminal: int = 0  # listed but not ended when the wait ran out
    failed: int = 0  # ended other than SUCCEEDED
    orphans: int = 0  # job processes alive after the last server stopped
    states: dict[str, int] = field(default_factory=dict)


class CrashRun:
    """One data dir, killed at each of `kill_points` in turn (seconds after a round's burst began, or
    FIRST_FINISH); `per_round` jobs submitted each round, each running about `seconds`."""

    def __init__(self, base: Path, gpus: int = 4, per_round: int = 6, seconds: float = 1.0):
        self.server: LiveServer = new_live_server(base, f"--GPUSched.local_gpus={gpus}")
        self.marks = self.server.root / "marks.txt"
        self.marks.touch()
        self.per_round, self.seconds = per_round, seconds
        make_notebook(
            self.server.root / "mark.ipynb",
            "import time\ntime.sleep(seconds)",
            f"import os\nwith open({str(self.marks)!r}, 'a') as f:\n    f.write(os.environ['GPUSCHED_JOB_ID'] + '\\n')",
            parameters="seconds = 1.0",
        )
        self.acknowledged: list[str] = []

    # --- one round: start, burst, kill ------------------------------------------------------------
    def round(self, kill_point: float | str, timeout: float = 60.0) -> int:
        """Start the server, submit, kill it -9 at `kill_point`. Returns how many submissions it acknowledged."""
        server = self.server
        server.start()
        done = threading.Event()
        acked: list[str] = []
        refused: list[str] = []
        marks_before = self._mark_lines()

        def submit() -> None:
            body = {"notebook": "mark.ipynb", "parameters": {"seconds": self.seconds}, "max_retries": 10}
            for _ in range(self.per_round):
                if done.is_set():
                    return
                try:
                    r = server.api("POST", "jobs", body, timeout=10)
                except requests.RequestException:
                    return  # the server died mid-request: not acknowledged
                if r.status_code == 201:
                    acked.append(r.json()["id"])
                else:
                    refused.append(f"{r.status_code} {r.text}")

        sender = threading.Thread(target=submit, name="crash-burst", daemon=True)
        started = time.monotonic()
        sender.start()
        if kill_point == FIRST_FINISH:
            wait_until(lambda: self._mark_lines() > marks_before, timeout, "a job of this round to finish", 0.02)
        else:
            time.sleep(max(0.0, float(kill_point) - (time.monotonic() - started)))
        server.kill()
        done.set()
        sender.join(15)
        self.acknowledged += acked
        assert not refused, f"submissions refused: {refused}"
        return len(acked)

    # --- the end: restart, wait, count --------------------------------------------------------------
    def settle(self, kill_point: str, timeout: float = 120.0) -> CrashCounts:
        server = self.server
        server.start()
        try:

            def all_ended() -> dict | None:
                jobs = server.api("GET", "jobs?limit=10000").json()["jobs"]
                return jobs if all(j["state"] in TERMINAL for j in jobs) else None

            try:
                jobs = wait_until(all_ended, timeout, "every job to end", 0.5)
            except AssertionError:
                jobs = server.api("GET", "jobs?limit=10000").json()["jobs"]
        finally:
            server.stop()
        listed = Counter(j["id"] for j in jobs)
        state = {j["id"]: j["state"] for j in jobs}
        ran = Counter(self.marks.read_text().split())
        acked = set(self.acknowledged)
        return CrashCounts(
            kill_point=kill_point,
            acknowledged=len(acked),
            present=sum(1 for i in acked if listed[i] == 1),
            duplicates=sum(1 for n in listed.values() if n > 1),
            lost=sum(1 for i in acked if i not in listed),
            run_twice=sum(1 for n in ran.values() if n > 1),
            not_terminal=sum(1 for s in state.values() if s not in TERMINAL),
            failed=sum(1 for s in state.values() if s in TERMINAL and s != "SUCCEEDED"),
            orphans=len(self.orphans()),
            states=dict(Counter(state.values())),
        )

    def orphans(self, wait: float = 5.0) -> list[int]:
        """Live processes of this data dir's jobs (their environment names a job folder under it)."""
        entry = f"GPUSCHED_JOB_DIR={self.server.data / 'jobs'}".encode()
        deadline = time.monotonic() + wait
        while True:
            found = []
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    env = Path(f"/proc/{name}/environ").read_bytes()
                    stat = Path(f"/proc/{name}/stat").read_bytes()
                except OSError:
                    continue
                alive = stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")
                if alive and any(e.startswith(entry) for e in env.split(b"\0")):
                    found.append(int(name))
            if not found or time.monotonic() > deadline:
                return found
            time.sleep(0.2)

    def _mark_lines(self) -> int:
        return len(self.marks.read_text().split())

    def server_log(self) -> str:
        return self.server.log.read_text(errors="replace") if self.server.log.exists() else ""
