"""Side by side with jupyter-scheduler (the Jupyter project's notebook-job extension), in one interleaved run.

Installs nothing. The peer runs from its own Python environment (it pins its own dependencies), e.g.:

    python -m venv /tmp/peer-venv && /tmp/peer-venv/bin/pip install "jupyter-scheduler>=2,<3" ipykernel
    python benchmarks/peer_jupyter_scheduler.py --peer-python /tmp/peer-venv/bin/python [--rounds 5]

Three servers run at once, each on its own folder: ours with its defaults (`local_gpus` 4: 4 jobs at a time), ours
at 40-way (`--GPUSched.local_gpus=40`, every job at once, as the peer does) and the peer. Each round submits the
same burst of jobs to each of them in turn (the order rotates per round). It prints:
- single-job latency: submit -> executed output, median of 3, each server in turn;
- per burst round: time from the first submit to all outputs, failed jobs, submit latency p50/p99, peak memory
  (RSS summed over the server and all its children, sampled every 0.25 s);
- list latency (first page, median of 15) with 1,000 and 5,000 finished jobs in each store (fresh servers);
- a feature table read from both APIs (the peer's /scheduler/config, our endpoints and job fields).
Exit status 1 if any job failed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import psutil
import requests

from jupyter_gpusched.testing.net import free_port
from jupyter_gpusched.testing.stores import prefill_finished_jobs

TOKEN = "peer-bench-" + secrets.token_hex(4)
WORK = "import math\ntotal = sum(math.sqrt(i) for i in range(200_000))\nprint(round(total))"
PEER_PREFILL = """
import sys, time
from jupyter_scheduler.orm import Job, create_session, create_tables
url, n = sys.argv[1], int(sys.argv[2])
create_tables(url)
now = int(time.time() * 1000) - 86_400_000
with create_session(url)() as s:
    s.add_all([Job(name=f"old{i}", runtime_environment_name="python3", input_filename="work.ipynb",
                   output_formats=["ipynb"], status="COMPLETED", create_time=now + i, update_time=now + i + 60,
                   start_time=now + i, end_time=now + i + 60) for i in range(n)])
    s.commit()
"""


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")


def tree_rss(pid: int) -> int:
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


class PeakMemory:
    """Samples the RSS of a process tree on a thread until stopped; `peak` in bytes."""

    def __init__(self, pid: int, interval: float = 0.25):
        self.pid, self.interval, self.peak = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Server:
    """One Jupyter server in its own session, reached over HTTP with a token."""

    label: str
    python: str
    folder: Path
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None
    port: int = 0
    http: requests.Session = field(default_factory=requests.Session)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, ready: str, timeout: float = 90.0) -> Server:
        self.port = free_port()
        self.http.headers["Authorization"] = f"token {TOKEN}"
        cmd = [
            self.python, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--port={self.port}",
            "--ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={self.folder / 'root'}",
            *self.args,
        ]  # fmt: skip
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(self.folder / "runtime"), **self.env)
        with open(self.folder / "server.log", "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.label} exited; see {self.folder / 'server.log'}")
            try:
                if self.http.get(self.url + ready, timeout=2).status_code == 200:
                    return self
            except requests.ConnectionError:
                pass
            time.sleep(0.3)
        raise SystemExit(f"{self.label} did not answer in {timeout} s; see {self.folder / 'server.log'}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


class Ours:
    def __init__(self, server: Server):
        self.server = server

    def submit(self, notebook: str) -> str:
        r = self.server.http.post(self.server.url + "/gpusched/api/jobs", json={"notebook": notebook, "gpus": 1})
        assert r.status_code == 201, r.text
        return r.json()["id"]

    def states(self, ids: set[str]) -> dict[str, str]:
        r = self.server.http.get(self.server.url + "/gpusched/api/jobs", params={"limit": 10000})
        done = {"SUCCEEDED": "ok", "FAILED": "failed", "CANCELLED": "failed"}
        return {j["id"]: done.get(j["state"], "") for j in r.json()["jobs"] if j["id"] in ids}

    def list_page(self) -> None:
        assert self.server.http.get(self.server.url + "/gpusched/api/jobs").status_code == 200


class Peer:
    def __init__(self, server: Server):
        self.server = server

    def submit(self, notebook: str) -> str:
        body = {
            "name": notebook,
            "input_uri": notebook,
            "input_filename": notebook,
            "runtime_environment_name": "python3",
            "output_formats": ["ipynb"],
        }
        r = self.server.http.post(self.server.url + "/scheduler/jobs", json=body)
        assert r.status_code == 200, r.text
        return r.json()["job_id"]

    def states(self, ids: set[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        done = {"COMPLETED": "ok", "FAILED": "failed"}  # (STOPPED is also its state before it starts)
        token = None
        while True:
            params = {"max_items": 1000, **({"next_token": token} if token else {})}
            page = self.server.http.get(self.server.url + "/scheduler/jobs", params=params).json()
            out.update({j["job_id"]: done.get(j["status"], "") for j in page["jobs"] if j["job_id"] in ids})
            token = page.get("next_token")
            if not token:
                return out

    def list_page(self) -> None:
        assert self.server.http.get(self.server.url + "/scheduler/jobs").status_code == 200


@dataclass
class Burst:
    seconds: float
    failed: int
    submit: list[float]
    peak_bytes: int


def burst(side: Ours | Peer, n: int, timeout: float) -> Burst:
    assert side.server.proc is not None
    with PeakMemory(side.server.proc.pid) as mem:
        started = time.perf_counter()
        submit = []
        ids = set()
        for _ in range(n):
            t = time.perf_counter()
            ids.add(side.submit("work.ipynb"))
            submit.append(time.perf_counter() - t)
        states = wait_all(side, ids, timeout)
        seconds = time.perf_counter() - started
    failed = sum(1 for s in states.values() if s != "ok")
    return Burst(seconds, failed, submit, mem.peak)


def wait_all(side: Ours | Peer, ids: set[str], timeout: float, interval: float = 0.5) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = side.states(ids)
        if len(states) == len(ids) and all(states.values()):
            return states
        time.sleep(interval)
    return {i: states.get(i) or "timeout" for i in ids}


def single(side: Ours | Peer) -> float:
    t = time.perf_counter()
    job = side.submit("work.ipynb")
    states = wait_all(side, {job}, 300, interval=0.05)
    assert states[job] == "ok", states
    return time.perf_counter() - t


def make_folder(base: Path, name: str) -> Path:
    folder = base / name
    (folder / "root").mkdir(parents=True)
    (folder / "runtime").mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells.append(nbformat.v4.new_code_cell(WORK))
    nbformat.write(nb, str(folder / "root" / "work.ipynb"))
    return folder


def ours_server(base: Path, name: str, gpus: int | None) -> Server:
    folder = make_folder(base, name)
    args = [f"--GPUSched.data_dir={folder / 'data'}"] + ([f"--GPUSched.local_gpus={gpus}"] if gpus else [])
    return Server(name, sys.executable, folder, args)


def peer_server(base: Path, name: str, python: str) -> Server:
    folder = make_folder(base, name)
    args = [f"--SchedulerApp.db_url=sqlite:///{folder / 'peer.sqlite'}"]
    # its staging area lives under the Jupyter data dir: keep it in this folder
    return Server(name, python, folder, args, env={"JUPYTER_DATA_DIR": str(folder / "data")})


def prefill_ours(server: Server, n: int) -> None:
    prefill_finished_jobs(server.folder / "data", n, notebook="work.ipynb")


def list_latency(base: Path, peer_python: str, n: int, reps: int = 15) -> tuple[float, float]:
    ours = ours_server(base, f"ours-list-{n}", None)
    peer = peer_server(base, f"peer-list-{n}", peer_python)
    prefill_ours(ours, n)
    subprocess.run([peer_python, "-c", PEER_PREFILL, f"sqlite:///{peer.folder / 'peer.sqlite'}", str(n)], check=True)
    out = []
    for server, side in ((ours, Ours), (peer, Peer)):
        server.start("/gpusched/api/cluster" if side is Ours else "/scheduler/config")
        try:
            times = []
            for _ in range(reps):
                t = time.perf_counter()
                side(server).list_page()
                times.append(time.perf_counter() - t)
            out.append(statistics.median(times))
        finally:
            server.stop()
    return out[0], out[1]


def features(ours: Server, peer: Server) -> list[tuple[str, str, str]]:
    """(feature, ours, peer), each read from the server's API: the peer's declared `supported_features` (a
    feature it does not declare reads "not declared") and the endpoints that answer; our job's fields and
    endpoints."""
    pf = peer.http.get(peer.url + "/scheduler/config").json()["supported_features"]
    jid = ours.http.get(ours.url + "/gpusched/api/jobs", params={"limit": 1}).json()["jobs"][0]["id"]
    job = ours.http.get(ours.url + f"/gpusched/api/jobs/{jid}").json()

    def answers(server: Server, path: str) -> str:
        return "yes" if server.http.get(server.url + path, timeout=10).status_code == 200 else "no"

    def has(field: str) -> str:
        return "yes" if field in job else "no"

    def declared(key: str) -> str:
        return "not declared" if key not in pf else "yes" if pf[key] else "no"

    return [
        ("parameters", has("parameters"), declared("parameters")),
        ("job name", has("name"), declared("job_name")),
        ("timeout", has("max_runtime"), declared("timeout_seconds")),
        ("retries", has("max_retries"), declared("max_retries")),
        ("stop / cancel a job", "yes (DELETE /jobs/{id})", declared("stop_job")),
        ("recurring schedules", "no", answers(peer, "/scheduler/job_definitions")),
        ("output formats", "ipynb", declared("output_formats")),
        ("email notifications", "no", declared("email_notifications")),
        ("GPU allocation", has("allocation"), "no"),
        ("queue with position and ETA", "yes" if {"position", "estimated_start"} <= set(job) else "no", "no"),
        ("priorities", has("priority"), "no"),
        ("tenants and quotas", answers(ours, "/gpusched/api/queues"), "no"),
        ("live log", answers(ours, f"/gpusched/api/jobs/{jid}/log"), "no"),
        ("job history (events)", answers(ours, f"/gpusched/api/jobs/{jid}/events"), "no"),
        ("Prometheus metrics", answers(ours, "/gpusched/metrics"), answers(peer, "/scheduler/metrics")),
        ("demand forecast", answers(ours, "/gpusched/api/forecast"), "no"),
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-python", default=os.environ.get("PEER_PYTHON", "/tmp/peer-venv/bin/python"))
    ap.add_argument("--rounds", type=int, default=1, help="burst rounds (each: the peer, ours at 40-way, ours)")
    ap.add_argument("--burst", type=int, default=40, help="jobs per burst")
    ap.add_argument("--skip-default", action="store_true", help="no bursts on ours at its default concurrency")
    ap.add_argument("--lists", default="1000,5000", help="store sizes for the list latency ('' to skip)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds a burst may take")
    args = ap.parse_args()
    try:
        subprocess.run([args.peer_python, "-c", "import jupyter_scheduler"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit(f"no jupyter-scheduler for {args.peer_python}; see this script's docstring") from None

    base = Path(tempfile.mkdtemp(prefix="gpusched-peer-"))
    print(f"folders and server logs: {base}; {os.cpu_count()} CPUs", flush=True)
    servers = {
        "peer": peer_server(base, "peer", args.peer_python),
        "ours-40": ours_server(base, "ours-40", args.burst),
        "ours": ours_server(base, "ours", None),
    }
    sides: dict[str, Callable[[Server], Ours | Peer]] = {"peer": Peer, "ours-40": Ours, "ours": Ours}
    if args.skip_default:
        del servers["ours"]
    failed = 0
    try:
        for name, server in servers.items():
            server.start("/scheduler/config" if name == "peer" else "/gpusched/api/cluster")
        side = {name: sides[name](server) for name, server in servers.items()}
        singles: dict[str, list[float]] = {name: [] for name in ("ours", "peer")}
        for _ in range(3):
            for name in singles:
                singles[name].append(single(side[name if name in side else "ours-40"]))
        print(
            f"\nsingle job, submit -> executed output (median of 3): ours {statistics.median(singles['ours']):.2f} s, "
            f"peer {statistics.median(singles['peer']):.2f} s",
            flush=True,
        )
        print(
            f"\n{args.burst}-job bursts: time to all outputs, failed, submit p50/p99, peak memory (server + children)"
        )
        results: dict[str, list[Burst]] = {name: [] for name in servers}
        order = list(servers)
        for r in range(args.rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                b = burst(side[name], args.burst, args.timeout)
                results[name].append(b)
                failed += b.failed
                print(
                    f"  round {r + 1} {name:8s} {b.seconds:7.1f} s  failed {b.failed:2d}  submit p50 "
                    f"{pct(b.submit, 0.5) * 1000:6.0f} ms p99 {pct(b.submit, 0.99) * 1000:6.0f} ms  "
                    f"peak {b.peak_bytes / 2**20:7.0f} MiB",
                    flush=True,
                )
        print("\nsummary over rounds (median time, worst time, failed jobs, submit p50/p99 over all, max peak):")
        for name, bs in results.items():
            if not bs:
                continue
            subs = [s for b in bs for s in b.submit]
            print(
                f"  {name:8s} {statistics.median(b.seconds for b in bs):7.1f} s  worst {max(b.seconds for b in bs):7.1f}"
                f" s  failed {sum(b.failed for b in bs):3d}/{args.burst * len(bs)}  submit p50 "
                f"{pct(subs, 0.5) * 1000:6.0f} ms p99 {pct(subs, 0.99) * 1000:6.0f} ms  peak "
                f"{max(b.peak_bytes for b in bs) / 2**20:7.0f} MiB"
            )
        print("\nfeatures, read from each API:")
        print(f"  {'feature':30s} {'ours':28s} peer")
        for feature, ours, peer in features(servers.get("ours") or servers["ours-40"], servers["peer"]):
            print(f"  {feature:30s} {ours:28s} {peer}")
    finally:
        for server in servers.values():
            server.stop()
    sizes = [int(n) for n in args.lists.split(",") if n.strip()]
    if sizes:
        print("\nlist latency, first page (median of 15):")
        for n in sizes:
            ours_s, peer_s = list_latency(base, args.peer_python, n)
            print(f"  {n:5d} jobs in the store: ours {ours_s * 1000:6.1f} ms, peer {peer_s * 1000:6.1f} ms", flush=True)
    shutil.rmtree(base, ignore_errors=True) if not failed else None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
