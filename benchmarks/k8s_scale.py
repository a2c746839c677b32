"""The kubernetes backend's own cost at scale: memory, API-server requests, the pod-log copy.

    python benchmarks/k8s_scale.py                               # 1,000 nodes x 8 GPUs, 10,000 jobs
    python benchmarks/k8s_scale.py --nodes 200 --jobs 2000 --log-workers 1 4

On a test control plane (scripts/k8s-testenv.sh, started with its audit log on) with N kwok GPU nodes:

1. **Idle.** The live service (store + core + backend, log copy on) watching the N nodes, no jobs: its memory
   (RSS of this process, and the Python heap by tracemalloc), the API requests it makes (counted in the API
   server's audit log by the backend's User-Agent, `USER_AGENT`), CPU.
2. **Busy.** M jobs of 8 GPUs (one whole node each, a simulated run time of an hour): N of them run, one pod a
   node, the rest queue. The same figures, plus the pod-log copy: fetches/s, the interval each running pod's
   log is actually fetched at (the target is `log_interval`), and the CPU of the copier's threads.
3. With `--log-workers A B ...`: the busy measure again for each pool size, on a service restarted with it (it
   adopts the running jobs, as after any restart).

The cluster's own heartbeats (node leases, node status) are left out of the audit log; the figures are the
requests of this service alone. A table is printed at the end, and with --json the raw figures are written.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from k8s_bench import create_nodes, wait_ready  # noqa: E402

from jupyter_gpusched.backends.kubernetes import USER_AGENT, Api, KubernetesBackend, KubernetesConfig  # noqa: E402
from jupyter_gpusched.core import JobState, Pool  # noqa: E402
from jupyter_gpusched.core.health import HealthConfig  # noqa: E402
from jupyter_gpusched.service import Service  # noqa: E402
from jupyter_gpusched.testing.kwok import SIM_IMAGE, TESTENV, ensure_namespace, simulate  # noqa: E402
from jupyter_gpusched.testing.notebooks import make_notebook  # noqa: E402
from jupyter_gpusched.testing.service import service_in  # noqa: E402
from jupyter_gpusched.testing.waits import wait_until  # noqa: E402

BENCH_AGENT = "gpusched-bench/k8s_scale"  # this script's own requests (nodes, namespace): not counted
CLK = os.sysconf("SC_CLK_TCK")


# --- what we read ----------------------------------------------------------------------------------------------
def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def heap_mib() -> float | None:
    if not tracemalloc.is_tracing():
        return None
    gc.collect()
    return tracemalloc.get_traced_memory()[0] / 2**20


def cpu_s(pid: int | str = "self", tid: int | None = None) -> float:
    """user + system CPU seconds of a process (or one of its threads)."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def log_threads_cpu_s() -> float:
    return sum(
        cpu_s(tid=t.native_id)
        for t in threading.enumerate()
        if t.name.startswith("gpusched-k8s-logs") and t.native_id is not None and t.is_alive()
    )


class Audit:
    """The backend's requests in the API server's audit log, by the time the API server received them."""

    def __init__(self, path: Path):
        self.path = path

    @staticmethod
    def stamp(t: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"

    def requests(self, t0: float, t1: float) -> Counter:
        """verb (and `get log` for pod-log fetches) -> count, for requests received in [t0, t1). A watch
        counts once, when it opens (stage ResponseStarted); any other request when it completes."""
        a, b = self.stamp(t0), self.stamp(t1)
        out: Counter = Counter()
        needle = USER_AGENT.encode()
        with open(self.path, "rb") as f:
            for line in f:
                if needle not in line:
                    continue
                ev = json.loads(line)
                if not (a <= ev["requestReceivedTimestamp"] < b):
                    continue
                verb = ev["verb"]
                if (verb == "watch") != (ev["stage"] == "ResponseStarted"):
                    continue
                sub = (ev.get("objectRef") or {}).get("subresource")
                out[f"{verb} {sub}" if sub else verb] += 1
        return out


def cluster_pids(cluster_dir: Path | None) -> dict[str, int]:
    if cluster_dir is None:
        return {}
    pids = {}
    for name in ("kube-apiserver", "kwok", "etcd"):
        try:
            pids[name] = int((cluster_dir / "pids" / name).read_text())
        except (OSError, ValueError):
            pass
    return pids


# --- the service ---------------------------------------------------------------------------------------------
def make_service(work: Path, kubeconfig: str, ns: str, log_workers: int, args) -> Service:
    make_notebook(work / "root" / "sim.ipynb", kernelspec=False)
    cfg = KubernetesConfig(
        kubeconfig=kubeconfig,
        namespace=ns,
        instance=ns,
        image=SIM_IMAGE,
        workers=args.workers,
        dry_run_on_submit=False,
        ttl_after_finished=None,
        sync_timeout=120,
        copy_logs=True,
        log_interval=args.log_interval,
        log_workers=log_workers,
    )
    backend = KubernetesBackend(cfg, pod_customizer=simulate)
    backend.wait_synced(120)
    return service_in(
        work,
        backend,
        pools=(Pool("bench"),),
        tick_interval=args.tick,
        memory_check_interval=1e9,
        health=HealthConfig(heartbeat_timeout=7200, start_timeout=7200),
    )


def ticking(service: Service, seconds: float, tick: float) -> float:
    """Tick the service as its loop would for `seconds`; the longest tick."""
    end, longest = time.monotonic() + seconds, 0.0
    while time.monotonic() < end:
        a = time.monotonic()
        service.tick()
        longest = max(longest, time.monotonic() - a)
        time.sleep(max(0.0, tick - (time.monotonic() - a)))
    return longest


def measure(service: Service, audit: Audit, pids: dict[str, int], seconds: float, args, label: str) -> dict:
    """One window: requests, CPU (this process, the log threads, the cluster's processes), memory."""
    running = sum(1 for j in service.scheduler.jobs.values() if j.state is JobState.RUNNING)
    logs0, cpu0, lcpu0 = service.backend.log_stats, cpu_s(), log_threads_cpu_s()
    ext0 = {k: cpu_s(p) for k, p in pids.items()}
    t0 = time.time()
    longest = ticking(service, seconds, args.tick)
    t1 = time.time()
    logs1, cpu1, lcpu1 = service.backend.log_stats, cpu_s(), log_threads_cpu_s()
    ext1 = {k: cpu_s(p) for k, p in pids.items()}
    time.sleep(2.0)  # (the audit log is written in batches)
    reqs = audit.requests(t0, t1)
    span = t1 - t0
    fetches = logs1["fetches"] - logs0["fetches"]
    res = {
        "window": label,
        "seconds": round(span, 1),
        "running_pods": running,
        "jobs": len(service.scheduler.jobs),
        "requests": dict(reqs),
        "requests_per_s": round(sum(reqs.values()) / span, 2),
        "non_log_requests_per_s": round((sum(reqs.values()) - reqs.get("get log", 0)) / span, 2),
        "rss_mib": round(rss_mib(), 1),
        "heap_mib": None if (h := heap_mib()) is None else round(h, 1),
        "cpu_pct": round(100 * (cpu1 - cpu0) / span, 1),
        "log_workers": service.backend.cfg.log_workers,
        "log_fetches_per_s": round(fetches / span, 1),
        "log_fetch_errors": logs1["fetch_errors"] - logs0["fetch_errors"],
        "log_max_in_flight": logs1["max_in_flight"],
        "log_threads_cpu_pct": round(100 * (lcpu1 - lcpu0) / span, 1),
        "log_cpu_ms_per_fetch": round(1000 * (lcpu1 - lcpu0) / fetches, 2) if fetches else None,
        "log_interval_achieved_s": round(running * span / fetches, 1) if fetches and running else None,
        "cluster_cpu_pct": {k: round(100 * (ext1[k] - ext0[k]) / span, 1) for k in ext0},
        "longest_tick_s": round(longest, 3),
    }
    print(json.dumps(res), flush=True)
    return res


def restart(service: Service, work: Path, kubeconfig: str, ns: str, log_workers: int, args) -> Service:
    service.backend.close()
    service.store.close()
    return make_service(work, kubeconfig, ns, log_workers, args)


# --- the run -------------------------------------------------------------------------------------------------
def run(api: Api, kubeconfig: str, audit: Audit, pids: dict[str, int], args, work: Path) -> dict:
    ns = "bench-scale"
    ensure_namespace(api, ns)
    base_rss = rss_mib()
    t0 = time.monotonic()
    create_nodes(api, [(f"bench-{i:04d}", "bench") for i in range(args.nodes)])
    wait_ready(api, "bench-", args.nodes)
    print(f"[scale] {args.nodes} nodes Ready in {time.monotonic() - t0:.0f} s", flush=True)
    if args.tracemalloc:
        tracemalloc.start()
    base_heap = heap_mib()
    t_start = time.time()
    service = make_service(work, kubeconfig, ns, args.log_workers[0], args)
    start_reqs = audit.requests(t_start, time.time() + 1)
    c = service.scheduler.cluster
    print(f"[scale] service sees {len(c.node_names)} nodes, {c.total_gpus} GPUs", flush=True)
    windows = [measure(service, audit, pids, args.idle, args, "idle")]

    t_sub, t_burst = time.monotonic(), time.time()
    for _ in range(args.jobs):
        service.submit(notebook="sim.ipynb", owner="bench", gpus=8, parameters={"sim_duration": 7200})
    print(f"[scale] {args.jobs} jobs submitted in {time.monotonic() - t_sub:.0f} s", flush=True)
    want = min(args.nodes, args.jobs)

    def all_running() -> bool:
        service.tick()
        return sum(1 for j in service.scheduler.jobs.values() if j.state is JobState.RUNNING) >= want

    t_run = time.monotonic()
    wait_until(all_running, args.timeout, f"{want} jobs running", 0.5)
    print(f"[scale] {want} jobs running in {time.monotonic() - t_run:.0f} s", flush=True)
    time.sleep(2.0)  # (the audit log is written in batches)
    burst = {"seconds": round(time.time() - 2.0 - t_burst, 1), "requests": dict(audit.requests(t_burst, time.time()))}
    print(f"[scale] requests from the first submit to {want} running: {burst}", flush=True)
    ticking(service, args.settle, args.tick)  # every running pod has had its first fetch
    windows.append(measure(service, audit, pids, args.busy, args, "busy"))
    for n in args.log_workers[1:]:
        service = restart(service, work, kubeconfig, ns, n, args)
        wait_until(all_running, args.timeout, f"{want} jobs adopted", 0.5)
        ticking(service, args.settle, args.tick)
        windows.append(measure(service, audit, pids, args.busy, args, "busy"))
    service.backend.close()
    service.store.close()
    return {
        "nodes": args.nodes,
        "gpus": c.total_gpus,
        "jobs": args.jobs,
        "log_interval_s": args.log_interval,
        "rss_before_service_mib": round(base_rss, 1),
        "heap_before_service_mib": None if base_heap is None else round(base_heap, 1),
        "startup_requests": dict(start_reqs),
        "burst": burst,
        "windows": windows,
    }


def table(res: dict) -> str:
    rows = [
        (
            "window",
            "pods",
            "jobs",
            "workers",
            "req/s",
            "non-log req/s",
            "log fetch/s",
            "interval s",
            "log CPU %",
            "ms/fetch",
            "svc CPU %",
            "apiserver CPU %",
            "RSS MiB",
            "heap MiB",
        ),
    ]
    for w in res["windows"]:
        rows.append(
            tuple(
                str(x)
                for x in (
                    w["window"],
                    w["running_pods"],
                    w["jobs"],
                    w["log_workers"],
                    w["requests_per_s"],
                    w["non_log_requests_per_s"],
                    w["log_fetches_per_s"],
                    w["log_interval_achieved_s"] or "-",
                    w["log_threads_cpu_pct"],
                    w["log_cpu_ms_per_fetch"] or "-",
                    w["cpu_pct"],
                    w["cluster_cpu_pct"].get("kube-apiserver", "-"),
                    w["rss_mib"],
                    w["heap_mib"] if w["heap_mib"] is not None else "-",
                )
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.rjust(widths[i]) for i, c in enumerate(r)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    head = (
        f"{res['nodes']} nodes x 8 GPUs, {res['jobs']} jobs of 8 GPUs, log_interval {res['log_interval_s']} s; "
        f"RSS before the service {res['rss_before_service_mib']} MiB"
        + (f", heap {res['heap_before_service_mib']} MiB" if res["heap_before_service_mib"] is not None else "")
        + f"; start-up requests {res['startup_requests']}"
        + f"; submit to all running ({res['burst']['seconds']} s): requests {res['burst']['requests']}"
    )
    return head + "\n" + "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="a running cluster started with GPUSCHED_K8S_AUDIT=1 (needs --cluster-dir)")
    p.add_argument("--cluster-dir", help="that cluster's folder (its audit log and pid files)")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--idle", type=float, default=60.0, help="seconds of the idle window")
    p.add_argument("--busy", type=float, default=60.0, help="seconds of each busy window")
    p.add_argument("--settle", type=float, default=15.0, help="seconds between all running and the busy window")
    p.add_argument("--log-interval", type=float, default=5.0)
    p.add_argument("--log-workers", type=int, nargs="+", default=[4], help="one busy window for each")
    p.add_argument("--workers", type=int, default=8, help="backend API threads")
    p.add_argument("--tick", type=float, default=0.5, help="seconds between service ticks")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--no-tracemalloc", dest="tracemalloc", action="store_false", help="RSS only (faster)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    work = Path(tempfile.mkdtemp(prefix="gpusched-k8s-scale-"))
    started = False
    if args.kubeconfig:
        if not args.cluster_dir:
            p.error("--kubeconfig needs --cluster-dir (the audit log is read from there)")
        kubeconfig, cluster_dir = args.kubeconfig, Path(args.cluster_dir)
    else:
        cluster_dir = work / "cluster"
        subprocess.run(["bash", str(TESTENV), "build"], check=True)
        env = {**os.environ, "GPUSCHED_K8S_AUDIT": "1"}
        subprocess.run(["bash", str(TESTENV), "start", str(cluster_dir)], check=True, env=env)
        started = True
        kubeconfig = str(cluster_dir / "kubeconfig")
    audit_log = cluster_dir / "logs" / "audit.log"
    if not audit_log.exists():
        p.error(f"no audit log at {audit_log}: start the cluster with GPUSCHED_K8S_AUDIT=1")
    api = Api(KubernetesConfig(kubeconfig=kubeconfig, request_timeout=30), pool_size=32, user_agent=BENCH_AGENT)
    try:
        res = run(api, kubeconfig, Audit(audit_log), cluster_pids(cluster_dir), args, work)
    finally:
        api.close()
        if started:
            subprocess.run(["bash", str(TESTENV), "stop", str(cluster_dir)])
    print(table(res), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
