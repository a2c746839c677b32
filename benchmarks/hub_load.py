"""Load on the JupyterHub service: many users submitting at once, then a service crash mid-load.

A real JupyterHub (configurable-http-proxy in front) with the gpusched service registered
as an external service this script runs itself (so it can kill and restart it). Every
submission goes through the Hub's proxy to the service with the user's own Hub token.
One admin job holds the only GPU, so the measured jobs stay queued (the figures are the
service's, not notebook start-up).

Phase 0: one user, 50 submissions one after another (the cost of one request).

Phase 1: USERS users x PER_USER submissions, all in flight at once. Checks that every
submission is acknowledged (201) and stored exactly once; reports p50/p99 submit latency
and the service's memory (RSS before, after, peak).

Phase 2: the same again, and the service is killed (SIGKILL) after KILL_AFTER
acknowledgements and started again. A client whose request failed asks the service (once
it is back) whether its job is there — by a tag in the job's parameters — and submits again
only if not, the way a careful client without idempotency keys must. Checks that every
acknowledged submission is still there after the restart, none twice, and that every
user ends with exactly PER_USER jobs.

    python benchmarks/hub_load.py [--users 50] [--per-user 20] [--kill-after 300] [--db sqlite|postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import aiohttp

from jupyter_gpusched.testing.hub import Hub, ServiceClient
from jupyter_gpusched.testing.notebooks import notebook_json
from jupyter_gpusched.testing.postgres import PostgresServer
from jupyter_gpusched.testing.waits import wait_for


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


class LoadUser:
    def __init__(self, name: str, token: str, base: str):
        self.name, self.token, self.base = name, token, base
        self.headers = {"Authorization": f"token {token}"}
        self.acked: dict[str, tuple[str, float]] = {}  # tag -> (job id, time of acknowledgement)
        self.latencies: list[float] = []  # the acknowledged request
        self.end_to_end: list[float] = []  # first attempt to acknowledgement (or finding it stored), retries included
        self.failures = 0
        self.resubmits = 0
        self.found_after_failure = 0
        self._scan_lock = asyncio.Lock()
        self._scan: tuple[float, dict[str, str]] = (-1.0, {})  # (when it started, tag -> job id)

    async def submit(self, session: aiohttp.ClientSession, tag: str, on_ack) -> None:
        body = {"notebook": "load.ipynb", "parameters": {"tag": tag}}
        first = time.perf_counter()
        while True:
            t0 = time.perf_counter()
            try:
                async with session.post(f"{self.base}gpusched/api/jobs", json=body, headers=self.headers) as r:
                    data = await r.json(content_type=None) if r.status == 201 else await r.text()
                    status = r.status
            except (aiohttp.ClientError, asyncio.TimeoutError):
                status, data = 0, None
            if status == 201:
                self.latencies.append(time.perf_counter() - t0)
                self.acked[tag] = (data["id"], time.monotonic())
                self.end_to_end.append(time.perf_counter() - first)
                on_ack()
                return
            if 400 <= status < 500 and status not in (403, 404, 429):
                raise RuntimeError(f"{self.name}: submission refused: {status} {data}")
            # The request failed (service down, proxy 502/503): was it stored before the crash?
            self.failures += 1
            existing = await self.find(session, tag, failed_at=time.monotonic())
            if existing is not None:
                self.found_after_failure += 1
                self.end_to_end.append(time.perf_counter() - first)
                return
            self.resubmits += 1

    async def find(self, session: aiohttp.ClientSession, tag: str, failed_at: float) -> str | None:
        """The id of this user's job with `tag`, from a listing made after the failure (one listing
        serves every request of this user that failed before it started)."""
        async with self._scan_lock:
            if self._scan[0] < failed_at:
                while True:
                    started = time.monotonic()
                    try:
                        self._scan = (started, {t: jid for jid, t in await self.tags(session)})
                        break
                    except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError):
                        await asyncio.sleep(0.5)  # the service is not back yet
            return self._scan[1].get(tag)

    async def tags(self, session: aiohttp.ClientSession) -> list[tuple[str, str]]:
        """(job id, tag) of every job of this user (listing pages, then each job's parameters)."""
        out, offset = [], 0
        while offset is not None:
            async with session.get(
                f"{self.base}gpusched/api/jobs", params={"mine": "true", "offset": str(offset)}, headers=self.headers
            ) as r:
                if r.status != 200:
                    raise RuntimeError(f"list: {r.status}")
                page = await r.json()
            for j in page["jobs"]:
                async with session.get(f"{self.base}gpusched/api/jobs/{j['id']}", headers=self.headers) as r:
                    if r.status != 200:
                        raise RuntimeError(f"get: {r.status}")
                    out.append((j["id"], (await r.json())["parameters"].get("tag")))
            offset = page["next_offset"]
        return out


async def sequential_latency(user: LoadUser, n: int) -> dict:
    """One submission at a time on an otherwise idle service: the cost of one request."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for i in range(n):
            await user.submit(session, f"p0-{user.name}-{i}", lambda: None)
    lat = user.latencies
    return {
        "phase": "p0",
        "submissions": n,
        "latency_ms": {"p50": round(1000 * pct(lat, 0.5), 1), "p99": round(1000 * pct(lat, 0.99), 1)},
    }


async def run_phase(hub: Hub, users: list[LoadUser], per_user: int, phase: str, kill_after: int | None) -> dict:
    acks = 0
    crash: dict = {}
    killed = asyncio.Event()

    def on_ack():
        nonlocal acks
        acks += 1
        if kill_after is not None and acks == kill_after and not killed.is_set():
            killed.set()

    async def crash_and_restart():
        await killed.wait()
        crash["acked_before"] = {(u.name, t) for u in users for t in u.acked}
        crash["pid_before"] = hub.service_proc.pid
        t0 = time.monotonic()
        hub.kill_service()
        hub.start_service()
        await asyncio.to_thread(wait_for, hub.service_up, 120, "the restarted service", 0.1)
        crash["downtime_s"] = time.monotonic() - t0

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:
        t0 = time.perf_counter()
        tasks = [u.submit(session, f"{phase}-{u.name}-{i}", on_ack) for u in users for i in range(per_user)]
        restarter = asyncio.ensure_future(crash_and_restart()) if kill_after is not None else None
        await asyncio.gather(*tasks)
        wall = time.perf_counter() - t0
        if restarter is not None:
            if not restarter.done():
                killed.set()
            await restarter
        # verification: each user's stored jobs, by tag
        stored = dict(
            zip([u.name for u in users], await asyncio.gather(*(u.tags(session) for u in users)), strict=True)
        )
    lost, duplicated, wrong_count = [], [], []
    for u in users:
        tags = Counter(t for _, t in stored[u.name] if t and t.startswith(f"{phase}-"))
        duplicated += [(u.name, t) for t, n in tags.items() if n > 1]
        lost += [(u.name, t) for t in u.acked if tags[t] == 0]
        if sum(tags.values()) != per_user:
            wrong_count.append((u.name, sum(tags.values())))
    if crash:
        lost_across_crash = [k for k in crash["acked_before"] if k in set(lost)]
        crash["acked_before"] = len(crash["acked_before"])
        crash["lost_across_crash"] = len(lost_across_crash)
    latencies = [x for u in users for x in u.latencies]
    e2e = [x for u in users for x in u.end_to_end]
    return {
        "phase": phase,
        "submissions": len(users) * per_user,
        "acknowledged": sum(len(u.acked) for u in users),
        "failed_requests": sum(u.failures for u in users),
        "found_after_failure": sum(u.found_after_failure for u in users),
        "resubmitted": sum(u.resubmits for u in users),
        "lost": len(lost),
        "duplicated": len(duplicated),
        "users_with_wrong_count": wrong_count,
        "wall_s": round(wall, 2),
        "submits_per_s": round(len(latencies) / wall, 1) if wall else None,
        "latency_ms": {
            "p50": round(1000 * pct(latencies, 0.50), 1),
            "p99": round(1000 * pct(latencies, 0.99), 1),
            "max": round(1000 * max(latencies), 1) if latencies else None,
            "mean": round(1000 * statistics.fmean(latencies), 1) if latencies else None,
        },
        "end_to_end_ms": {"p50": round(1000 * pct(e2e, 0.50), 1), "p99": round(1000 * pct(e2e, 0.99), 1)},
        **({"crash": crash} if crash else {}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--per-user", type=int, default=20)
    ap.add_argument("--kill-after", type=int, default=300, help="acknowledgements in phase 2 before the crash")
    ap.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--keep", action="store_true", help="keep the run's folder (logs) even when all is well")
    args = ap.parse_args()

    pg = PostgresServer().start() if args.db == "postgres" else None
    gpusched = {"local_gpus": 1, "tick_interval": 0.5}
    if pg is not None:
        gpusched["db_url"] = pg.create_database()
    names = [f"load{i:03d}" for i in range(args.users)]
    hub = Hub(
        Path(tempfile.mkdtemp(prefix="gpusched-hubload-")),
        admins=["admin"],
        gpusched=gpusched,
        external_service=True,
    )
    try:
        hub.start()
        hub.create_users(names)
        for name in [*names, "admin"]:
            hub.home(name).mkdir(parents=True, exist_ok=True)
            (hub.home(name) / "load.ipynb").write_text(notebook_json("print('hi')"))
        (hub.home("admin") / "blocker.ipynb").write_text(notebook_json("import time; time.sleep(3600)"))
        admin = ServiceClient(hub.service_url, hub.token("admin"))
        code, blocker = admin.json("POST", "api/jobs", json={"notebook": "blocker.ipynb"})
        assert code == 201, blocker
        wait_for(
            lambda: admin.json("GET", f"api/jobs/{blocker['id']}")[1]["state"] == "RUNNING", 120, "the blocker job"
        )
        users = [LoadUser(n, hub.token(n), hub.service_url) for n in names]
        pid = hub.service_proc.pid
        mem_before = rss_kib(pid)

        solo = LoadUser("admin", hub.token("admin"), hub.service_url)
        phase0 = asyncio.run(sequential_latency(solo, 50))
        phase1 = asyncio.run(run_phase(hub, users, args.per_user, "p1", None))
        mem_after = rss_kib(pid)
        phase1["service_memory_mib"] = {
            "rss_before": round(mem_before["VmRSS"] / 1024, 1),
            "rss_after": round(mem_after["VmRSS"] / 1024, 1),
            "peak": round(mem_after["VmHWM"] / 1024, 1),
        }
        for u in users:
            u.latencies, u.end_to_end, u.acked = [], [], {}
        phase2 = asyncio.run(run_phase(hub, users, args.per_user, "p2", args.kill_after))
        code, listing = admin.json("GET", "api/jobs", params={"limit": "1"})
        result = {
            "users": args.users,
            "per_user": args.per_user,
            "db": args.db,
            "sequential": phase0,
            "phases": [phase1, phase2],
            "jobs_in_store": listing["total"],
            "expected_in_store": 2 * args.users * args.per_user + 1 + phase0["submissions"],
        }
        admin.json("DELETE", f"api/jobs/{blocker['id']}")
    finally:
        hub.stop()
        if pg is not None:
            pg.stop()
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    ok = all(p["lost"] == 0 and p["duplicated"] == 0 and not p["users_with_wrong_count"] for p in result["phases"])
    ok = ok and result["jobs_in_store"] == result["expected_in_store"]
    if ok and not args.keep:
        shutil.rmtree(hub.base, ignore_errors=True)
    else:
        print(f"logs: {hub.base}", file=sys.stderr)
    print("OK: nothing lost or duplicated" if ok else "FAILED: see above", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
