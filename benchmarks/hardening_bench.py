"""Hardening figures (issue 11) against a real `jupyter server` with the extension, on the local backend.

1. Kills off the event loop: 4 jobs whose kernel and a detached child ignore SIGTERM are cancelled while a
   prober sends a cheap request every 10 ms. Prints the worst request latency before and while killing (the
   event loop's stall shows up there), each DELETE's time, and how long until every process was dead.
2. Streaming: 3 clients read a 200 MB log at once (`Range: bytes=0-`, so nothing caps the response). Prints
   the server process's RSS before and its peak while they read (sampled every 20 ms).

    python benchmarks/hardening_bench.py [--log-mb 200] [--readers 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path

import requests

from jupyter_gpusched.backends.processes import pid_alive
from jupyter_gpusched.testing.jupyter import LiveServer, new_live_server
from jupyter_gpusched.testing.notebooks import STUBBORN, make_notebook
from jupyter_gpusched.testing.waits import wait_until


class Prober(threading.Thread):
    """GET gpusched/api/me every `period` seconds; remembers the slowest answer."""

    def __init__(self, server: LiveServer, period: float = 0.01):
        super().__init__(daemon=True)
        self.server, self.period = server, period
        self.worst = 0.0
        self.count = 0
        self.done = threading.Event()

    def run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"token {self.server.token}"
        while not self.done.is_set():
            t0 = time.monotonic()
            session.get(f"{self.server.url}gpusched/api/me", timeout=30).raise_for_status()
            self.worst = max(self.worst, time.monotonic() - t0)
            self.count += 1
            time.sleep(self.period)

    def measure(self) -> float:
        self.done.set()
        self.join()
        return self.worst


def kill_lag(server: LiveServer) -> None:
    make_notebook(server.root / "stubborn.ipynb", STUBBORN, "time.sleep(300)", parameters="tag = 'x'")
    ids = []
    for i in range(4):
        r = server.api("POST", "jobs", {"notebook": "stubborn.ipynb", "parameters": {"tag": f"j{i}"}})
        r.raise_for_status()
        ids.append(r.json()["id"])
    pids: list[int] = []
    for i, job_id in enumerate(ids):
        server.wait_for_state(job_id, {"RUNNING"})
        found = wait_until(lambda i=i: (server.root / f"pids-j{i}.json").exists(), 60, "the notebook's pids")
        assert found
        pids += json.loads((server.root / f"pids-j{i}.json").read_text()).values()
        pids.append(int((server.data / "jobs" / job_id / "pid").read_text()))
    try:
        idle = Prober(server)
        idle.start()
        time.sleep(2.0)
        before = idle.measure()

        prober = Prober(server)
        prober.start()
        t0 = time.monotonic()
        deletes = []
        for job_id in ids:
            t = time.monotonic()
            server.api("DELETE", f"jobs/{job_id}").raise_for_status()
            deletes.append(time.monotonic() - t)
        wait_until(lambda: not any(pid_alive(p) for p in pids), 60, "the stubborn processes to die", 0.02)
        all_dead = time.monotonic() - t0
        time.sleep(0.5)
        worst = prober.measure()
    finally:
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
    print("1. killing 4 jobs that ignore SIGTERM (grace period 3 s)")
    print(f"   worst request latency, idle:         {before * 1000:7.1f} ms ({idle.count} requests)")
    print(f"   worst request latency, while killing: {worst * 1000:7.1f} ms ({prober.count} requests)")
    print(f"   DELETE times: {', '.join(f'{d * 1000:.0f} ms' for d in deletes)}")
    print(f"   every process dead after {all_dead:.1f} s")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def log_memory(server: LiveServer, log_mb: int, readers: int) -> None:
    make_notebook(server.root / "quick.ipynb", "x = 1")
    r = server.api("POST", "jobs", {"notebook": "quick.ipynb"})
    r.raise_for_status()
    job_id = r.json()["id"]
    server.wait_for_state(job_id, {"SUCCEEDED"})
    log = server.data / "jobs" / job_id / "log.txt"
    line = b"x" * 99 + b"\n"
    with open(log, "wb") as f:
        for _ in range(log_mb * 10_000):  # 100-byte lines: log_mb MB
            f.write(line)
    size = log.stat().st_size
    pid = server._process().pid
    base = rss_mib(pid)
    peak = base
    received = [0] * readers

    def read(n: int) -> None:
        with requests.get(
            f"{server.url}gpusched/api/jobs/{job_id}/log",
            headers={"Authorization": f"token {server.token}", "Range": "bytes=0-"},
            stream=True,
            timeout=120,
        ) as resp:
            resp.raise_for_status()
            for piece in resp.iter_content(256 * 1024):
                received[n] += len(piece)

    threads = [threading.Thread(target=read, args=(n,)) for n in range(readers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, rss_mib(pid))
        time.sleep(0.02)
    took = time.monotonic() - t0
    assert received == [size] * readers, (received, size)
    print(f"2. {readers} clients reading a {size / 1e6:.0f} MB log at once ({took:.1f} s)")
    print(f"   server RSS before: {base:.0f} MiB, peak while reading: {peak:.0f} MiB (+{peak - base:.0f} MiB)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--log-mb", type=int, default=200)
    p.add_argument("--readers", type=int, default=3)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpusched-hardening-") as tmp:
        server = new_live_server(Path(tmp), "--GPUSched.local_gpus=4").start()
        try:
            kill_lag(server)
            log_memory(server, args.log_mb, args.readers)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
