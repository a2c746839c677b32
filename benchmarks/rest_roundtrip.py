"""REST round trips on loopback against a real `jupyter server` with the extension.

The store is first filled with N finished jobs (default 10,000). One job holding every GPU
runs a long notebook, so the measured submissions stay queued (the numbers are the API's,
not notebook start-up). Prints p50/p99 of: submit, describe one job, list the first page and 10,000 jobs.

    python benchmarks/rest_roundtrip.py [--jobs 10000] [--submits 200] [--lists 30]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import requests

from jupyter_gpusched.testing.stores import prefill_finished_jobs

TOKEN = "bench-token"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def notebook(path: Path, source: str) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    nbformat.write(nb, str(path))


def prefill(data_dir: Path, n: int) -> None:
    prefill_finished_jobs(data_dir, n, owner=os.environ.get("USER", "bench"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10_000, help="finished jobs put in the store first")
    ap.add_argument("--submits", type=int, default=200)
    ap.add_argument("--lists", type=int, default=30)
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="gpusched-bench-"))
    root, data = tmp / "root", tmp / "data"
    root.mkdir()
    notebook(root / "hold.ipynb", "import time; time.sleep(3600)")
    notebook(root / "quick.ipynb", "x = 1")
    t0 = time.perf_counter()
    prefill(data, args.jobs)
    print(f"store prefilled with {args.jobs} jobs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/gpusched/api"
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyter_server",
            "--no-browser",
            "--allow-root",
            f"--port={port}",
            "--ip=127.0.0.1",
            f"--ServerApp.token={TOKEN}",
            f"--ServerApp.root_dir={root}",
            f"--GPUSched.data_dir={data}",
            "--GPUSched.local_gpus=4",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    http = requests.Session()
    http.headers["Authorization"] = f"token {TOKEN}"
    try:
        for _ in range(240):
            try:
                if http.get(f"{base}/cluster", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.25)
        else:
            raise SystemExit("the server did not start; see " + str(tmp / "server.log"))
        hold = http.post(f"{base}/jobs", json={"notebook": "hold.ipynb", "gpus": 4}).json()
        for _ in range(300):
            if http.get(f"{base}/jobs/{hold['id']}").json()["state"] == "RUNNING":
                break
            time.sleep(0.2)

        submit, describe, listing = [], [], []
        last = None
        for i in range(args.submits):
            t = time.perf_counter()
            r = http.post(f"{base}/jobs", json={"notebook": "quick.ipynb", "gpus": 1, "parameters": {"i": i}})
            submit.append(time.perf_counter() - t)
            assert r.status_code == 201, r.text
            last = r.json()["id"]
            t = time.perf_counter()
            r = http.get(f"{base}/jobs/{last}")
            describe.append(time.perf_counter() - t)
            assert r.status_code == 200
        total = 0
        page = []
        for _ in range(args.lists):
            t = time.perf_counter()
            r = http.get(f"{base}/jobs")
            page.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = http.get(f"{base}/jobs", params={"limit": 10000})
            listing.append(time.perf_counter() - t)
            total = r.json()["total"]
        http.delete(f"{base}/jobs/{hold['id']}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)

    rows = [
        ("submit (POST jobs)", submit),
        (f"describe queued job (GET jobs/id, {args.submits} queued)", describe),
        (f"list, first page (GET jobs, 1000 of {total})", page),
        (f"list, 10,000 jobs (GET jobs?limit=10000 of {total})", listing),
    ]
    print(f"{'request':<52} {'n':>5} {'p50 ms':>8} {'p99 ms':>8}")
    for name, values in rows:
        print(f"{name:<52} {len(values):>5} {pct(values, 0.5) * 1e3:>8.1f} {pct(values, 0.99) * 1e3:>8.1f}")
    print(
        json.dumps(
            {
                name: {"p50_ms": pct(v, 0.5) * 1e3, "p99_ms": pct(v, 0.99) * 1e3, "mean_ms": statistics.mean(v) * 1e3}
                for name, v in rows
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
