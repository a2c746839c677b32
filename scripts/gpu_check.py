"""What only a real GPU shows: NVML inventory, CUDA_VISIBLE_DEVICES isolation, leaked-memory fencing.

    python scripts/gpu_check.py [--out report.json]

Runs the live service (SQLite store, the local backend with NVML) in a temporary folder on a machine with
NVIDIA GPUs and PyTorch, and prints PASS/FAIL per check with the facts behind it:

1. inventory: the backend's GPU count and type are nvidia-smi's;
2. isolation: a 1-GPU job's kernel sees exactly one GPU, the one the scheduler gave it (CUDA_VISIBLE_DEVICES,
   PCI bus order), NVML sees its memory, and the GPU is not fenced while its job holds it; with every GPU
   taken, the next job waits;
3. leaks: a job leaves two `setsid` children holding GPU memory, one with the job's launch token and one that
   dropped it. The token sweep ends the first when the job ends; the second's memory fences the GPU, a job
   submitted then waits, and once that process is gone the GPU is clean again and the job runs.

This process never touches CUDA itself (its own context would hold memory and be fenced as a leak).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_gpusched.backends.local import LocalBackend
from jupyter_gpusched.backends.processes import pid_alive
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import run_until, service_in

PARAMETERS = "hold_mib = 1024\nhold_s = 5.0\nleak_dir = ''"
PROBE = """
import json, os, subprocess, sys, time
import torch
n = torch.cuda.device_count()
held = torch.empty(int(hold_mib) * 2**20, dtype=torch.uint8, device="cuda") if n and hold_mib else None
torch.cuda.synchronize() if n else None
facts = {"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "order": os.environ.get("CUDA_DEVICE_ORDER"),
         "count": n, "name": torch.cuda.get_device_name(0) if n else None}
print("PROBE " + json.dumps(facts), flush=True)
"""
LEAKER = """
if leak_dir:
    hog = ("import os, time, torch; x = torch.empty(1024 * 2**20, dtype=torch.uint8, device='cuda'); "
           "torch.cuda.synchronize(); open(os.environ['PIDFILE'], 'w').write(str(os.getpid())); time.sleep(300)")
    for name, keep_token in (("with-token", True), ("escaped", False)):
        env = {k: v for k, v in os.environ.items() if keep_token or k != "GPUSCHED_LAUNCH_TOKEN"}
        env["PIDFILE"] = os.path.join(leak_dir, name)
        subprocess.Popen([sys.executable, "-c", hog], env=env, start_new_session=True)
    deadline = time.time() + 90
    while time.time() < deadline and not all(os.path.exists(os.path.join(leak_dir, n)) for n in ("with-token", "escaped")):
        time.sleep(0.5)
"""
HOLD = "time.sleep(float(hold_s))"

results: list[dict[str, Any]] = []


def check(what: str, ok: bool, /, **facts: Any) -> bool:
    results.append({"check": what, "ok": bool(ok), **facts})
    print(f"{'PASS' if ok else 'FAIL'} {what}: {json.dumps(facts, default=str)}", flush=True)
    return bool(ok)


def smi() -> list[dict[str, str]]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,name,uuid,pci.bus_id,memory.total,memory.used", "--format=csv,noheader"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    keys = ("index", "name", "uuid", "bus", "total", "used")
    return [dict(zip(keys, (f.strip() for f in line.split(",")), strict=True)) for line in out.strip().splitlines()]


def torch_count(visible: str) -> int:
    code = "import torch; print(torch.cuda.device_count())"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible}
    return int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True).stdout.strip())


def probe_of(service: Any, job_id: str) -> dict[str, Any]:
    text = service.log_file(job_id).read_text(errors="replace")
    lines = [line for line in text.splitlines() if "PROBE " in line]
    return json.loads(lines[-1].split("PROBE ", 1)[1]) if lines else {"log_tail": text[-1500:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    args = ap.parse_args()
    gpus = smi()
    print("nvidia-smi:", json.dumps(gpus), flush=True)
    backend = LocalBackend(heartbeat_interval=0.5)
    (node,) = backend.inventory()
    (pool,) = backend.pools()
    check("inventory: GPU count", node.gpus == len(gpus), backend=node.gpus, nvidia_smi=len(gpus))
    check("inventory: GPU type", pool.gpu_type == gpus[0]["name"], backend=pool.gpu_type, nvidia_smi=gpus[0]["name"])
    idle = {f"{n}:{g}": round(v) for (n, g), v in backend.gpu_memory_used_mib().items()}
    check("NVML idle memory is under the leak threshold", all(v < 256 for v in idle.values()), mib=idle)
    check("CUDA_VISIBLE_DEVICES='' hides every GPU", torch_count("") == 0)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        service = service_in(folder, backend, memory_check_interval=1.0)
        make_notebook(folder / "root" / "probe.ipynb", PROBE, LEAKER, HOLD, parameters=PARAMETERS)
        cluster, name = service.scheduler.cluster, node.name
        everything = len(gpus)  # one job takes every GPU, so the next must wait
        started = time.monotonic()
        first = service.submit(
            notebook="probe.ipynb", owner="check", gpus=1, parameters={"hold_mib": 2048, "hold_s": 25}
        )
        fillers = [
            service.submit(notebook="probe.ipynb", owner="check", gpus=1, parameters={"hold_mib": 0, "hold_s": 25})
            for _ in range(everything - 1)
        ]
        second = service.submit(
            notebook="probe.ipynb", owner="check", gpus=1, parameters={"hold_mib": 512, "hold_s": 1}
        )
        run_until(service, lambda: first.state is JobState.RUNNING, 180, "first job running")
        print(f"first job running after {time.monotonic() - started:.1f} s", flush=True)
        gpu = first.allocation[0][1][0]
        seen: dict[str, float] = {}

        def memory_seen() -> bool:
            seen.update({"mib": backend.gpu_memory_used_mib().get((name, gpu), 0.0)})
            return seen["mib"] >= 2048

        run_until(service, memory_seen, 90, "the job's memory in NVML")
        check("NVML sees the running job's memory", True, gpu=gpu, mib=round(seen["mib"]))
        check("a GPU its job holds is not fenced", gpu not in cluster.fenced_on(name), fenced=cluster.fenced_on(name))
        check("with every GPU taken the next job waits", second.state is JobState.QUEUED, state=second.state.value)
        given_to: dict[str, str] = {}  # a job's GPUs while it holds them (a finished job holds none)

        def remember() -> None:
            for job in (first, second):
                if job.allocation:
                    given_to[job.id] = ",".join(str(g) for _, ids in job.allocation for g in ids)

        remember()
        jobs = (first, second, *fillers)
        run_until(service, lambda: all(j.state.terminal for j in jobs), 240, "jobs done", after_tick=remember)
        for label, job in (("first", first), ("second", second)):
            facts = probe_of(service, job.id)
            given = given_to.get(job.id, "")
            check(
                f"isolation: the {label} job's kernel sees only its GPU",
                job.state is JobState.SUCCEEDED and facts.get("count") == 1 and facts.get("visible") == given
                and facts.get("order") == "PCI_BUS_ID" and facts.get("name") == gpus[int(given)]["name"],
                state=job.state.value, given=given, **facts,
            )  # fmt: skip

        # Leaks: the job ends with two children still holding 1 GiB each.
        leaks = folder / "leaks"
        leaks.mkdir()
        leaker = service.submit(
            notebook="probe.ipynb",
            owner="check",
            gpus=1,
            parameters={"hold_mib": 0, "hold_s": 0, "leak_dir": str(leaks)},
        )
        run_until(service, lambda: leaker.state.terminal, 240, "the leaking job ends")
        pids = {p.name: int(p.read_text()) for p in leaks.iterdir()}
        leak_gpu = leaker.allocation[0][1][0] if leaker.allocation else 0
        ended = time.monotonic()
        try:
            run_until(service, lambda: not pid_alive(pids.get("with-token", -1)), 30, "the token sweep")
            swept = True
        except Exception:
            swept = False
        check("the token sweep ends a setsid child that kept the job's token", swept, state=leaker.state.value,
              pids=pids, after_s=round(time.monotonic() - ended, 1))  # fmt: skip
        escaped = pids.get("escaped", -1)
        check("a child that dropped the token outlives the job (what fencing is for)", pid_alive(escaped), pid=escaped)
        try:
            run_until(service, lambda: leak_gpu in cluster.fenced_on(name), 30, "the leak fenced")
            fenced = True
        except Exception:
            fenced = False
        check("leaked memory fences the GPU", fenced, gpu=leak_gpu, mib=round(backend.gpu_memory_used_mib().get((name, leak_gpu), 0)),
              after_s=round(time.monotonic() - ended, 1))  # fmt: skip
        waiting = [
            service.submit(notebook="probe.ipynb", owner="check", gpus=1, parameters={"hold_mib": 256, "hold_s": 1})
            for _ in range(everything)
        ]
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            service.tick()
            time.sleep(0.2)
        check(
            "a job submitted while the GPU is fenced waits",
            any(j.state is JobState.QUEUED for j in waiting),
            states=[j.state.value for j in waiting],
        )
        for pid in pids.values():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        cleaned = time.monotonic()
        run_until(service, lambda: leak_gpu not in cluster.fenced_on(name), 60, "the GPU clean again")
        check("the GPU is clean again once the process is gone", True, after_s=round(time.monotonic() - cleaned, 1))
        run_until(service, lambda: all(j.state.terminal for j in waiting), 180, "the waiting jobs run")
        check(
            "the waiting jobs then run",
            all(j.state is JobState.SUCCEEDED for j in waiting),
            states=[j.state.value for j in waiting],
        )
    failed = [r["check"] for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)}/{len(results)} checks passed", flush=True)
    if args.out:
        args.out.write_text(json.dumps({"nvidia_smi": gpus, "results": results}, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
