"""The kubernetes backend at scale, against a real control plane with kwok GPU nodes.

    python benchmarks/k8s_bench.py                       # 1,000 nodes x 8 GPUs, 10,000 jobs, then the trace replay
    python benchmarks/k8s_bench.py --nodes 200 --jobs 2000 --no-replay
    python benchmarks/k8s_bench.py --kubeconfig KCFG     # use a running cluster (its nodes are left alone
                                                         #  unless --nodes creates bench-* nodes)

1. **Scale.** N fake nodes (pool `bench`, 8 nvidia.com/gpu each) and M jobs (1/2/4 GPUs, mixed priorities,
   simulated run time `--duration` s +-50%) submitted to the live service (store + core + this backend) in one
   burst. Reported: submit rate; core admissions/s; Kubernetes admissions/s (Jobs unsuspended by the
   placement patch, the backend's counter); pods reaching Running per second; submit-to-pod-Running latency
   p50/p99 (all jobs, and jobs admitted on their first pass, which excludes waiting for capacity); time to
   drain; API retries/errors.
2. **Replay.** A window of the seed-3x8 scenario (a real day of the Philly trace on 3 nodes x 8 GPUs),
   compressed `--speedup` times, through this cluster and through the simulator with the same jobs, tenants,
   priorities and policy: JCT (mean, p50, p95), utilisation and makespan side by side.

The cluster is started with scripts/k8s-testenv.sh unless --kubeconfig is given. Results go to stdout and,
with --json, to a file.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from jupyter_gpusched.backends.kubernetes import Api, KubeApiError, KubernetesBackend, KubernetesConfig  # noqa: E402
from jupyter_gpusched.core import JobState, Pool  # noqa: E402
from jupyter_gpusched.core.health import HealthConfig  # noqa: E402
from jupyter_gpusched.service import Service  # noqa: E402
from jupyter_gpusched.testing.kwok import (  # noqa: E402
    SIM_IMAGE,
    TESTENV,
    add_node,
    ensure_namespace,
    ready_nodes,
    simulate,
    testenv_bindir,
)
from jupyter_gpusched.testing.notebooks import make_notebook  # noqa: E402
from jupyter_gpusched.testing.service import service_in  # noqa: E402
from jupyter_gpusched.testing.waits import wait_until  # noqa: E402


def pct(values, q):
    if not values:
        return None
    values = sorted(values)
    k = (len(values) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


def create_nodes(api: Api, names_pools: list[tuple[str, str]], threads: int = 16) -> None:
    def one(item):
        name, pool = item
        for _ in range(20):
            try:
                add_node(api, name, pool)
                return
            except KubeApiError:
                time.sleep(0.5)
        raise RuntimeError(f"could not create node {name}")

    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, names_pools))


def delete_nodes(api: Api, prefix: str) -> None:
    names = [
        n["metadata"]["name"]
        for n in api.request("GET", "/api/v1/nodes")["items"]
        if n["metadata"]["name"].startswith(prefix)
    ]
    with ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda n: api.request("DELETE", f"/api/v1/nodes/{n}"), names))


def wait_ready(api: Api, prefix: str, count: int, timeout: float = 600) -> float:
    """Seconds until `count` nodes named `prefix`* are Ready."""
    t0 = time.monotonic()
    wait_until(
        lambda: sum(n.startswith(prefix) for n in ready_nodes(api)) >= count,
        timeout,
        f"{count} {prefix}* nodes ready",
        1,
    )
    return time.monotonic() - t0


def make_service(work: Path, kubeconfig: str, ns: str, pools, tenants=(), workers: int = 8, tick: float = 0.5):
    make_notebook(work / "root" / "sim.ipynb", kernelspec=False)
    cfg = KubernetesConfig(
        kubeconfig=kubeconfig,
        namespace=ns,
        instance=ns,
        image=SIM_IMAGE,
        workers=workers,
        heartbeat_interval=10.0,
        dry_run_on_submit=False,
        ttl_after_finished=None,
        sync_timeout=60,
    )
    backend = KubernetesBackend(cfg, pod_customizer=simulate)
    backend.wait_synced(60)
    return service_in(
        work,
        backend,
        pools=tuple(pools),
        tenants=tuple(tenants),
        tick_interval=tick,
        memory_check_interval=1e9,
        health=HealthConfig(heartbeat_timeout=600, start_timeout=3600),
    )


# --- 1. scale ---------------------------------------------------------------------------------------------
def bench_scale(api: Api, kubeconfig: str, args, work: Path) -> dict:
    ns = "bench-scale"
    ensure_namespace(api, ns)
    names = [(f"bench-{i:04d}", "bench") for i in range(args.nodes)]
    t0 = time.monotonic()
    create_nodes(api, names)
    ready_s = wait_ready(api, "bench-", args.nodes)
    print(f"[scale] {args.nodes} nodes created and Ready in {time.monotonic() - t0:.1f} s", flush=True)
    service = make_service(work / "scale", kubeconfig, ns, [Pool("bench")], workers=args.workers)
    c = service.scheduler.cluster
    print(f"[scale] service sees {len(c.node_names)} nodes, {c.total_gpus} GPUs", flush=True)
    rng = random.Random(7)
    t_submit = time.monotonic()
    jobs = []
    for _ in range(args.jobs):
        jobs.append(
            service.submit(
                notebook="sim.ipynb",
                owner="bench",
                gpus=rng.choice((1, 1, 2, 4)),
                priority=rng.choice(("high", "normal", "normal", "low")),
                parameters={"sim_duration": args.duration * rng.uniform(0.5, 1.5)},
            )
        )
    submit_s = time.monotonic() - t_submit
    print(f"[scale] submitted {args.jobs} jobs in {submit_s:.1f} s ({args.jobs / submit_s:.0f}/s)", flush=True)
    samples = []  # (t, admitted ever, running-or-done, k8s patches)
    first_pass: set[str] = set()
    t_start = time.monotonic()
    longest_tick = 0.0
    deadline = t_start + args.timeout
    while True:
        a = time.monotonic()
        service.tick()
        longest_tick = max(longest_tick, time.monotonic() - a)
        now = time.monotonic()
        if not samples:
            first_pass = {j.id for j in jobs if j.attempts > 0}
        admitted = sum(1 for j in jobs if j.attempts > 0)
        started = sum(1 for j in jobs if j.first_started_at is not None)
        samples.append((now - t_start, admitted, started, service.backend.stats["patches"]))
        if all(j.state.terminal for j in jobs) or now > deadline:
            break
        time.sleep(0.2)
    drain_s = time.monotonic() - t_start
    states = {s.value: sum(1 for j in jobs if j.state is s) for s in JobState if any(j.state is s for j in jobs)}
    lat_all = [j.first_started_at - j.submitted_at for j in jobs if j.first_started_at is not None]
    lat_first = [
        j.first_started_at - j.submitted_at for j in jobs if j.first_started_at is not None and j.id in first_pass
    ]

    # rates over 1-second buckets of the burst
    def peak_rate(col):
        best, series = 0.0, []
        for i in range(len(samples)):
            t, v = samples[i][0], samples[i][col]
            j = i
            while j > 0 and samples[j - 1][0] > t - 5.0:
                j -= 1
            if j < i and t - samples[j][0] > 0:
                series.append((v - samples[j][col]) / (t - samples[j][0]))
        return max(series) if series else best

    t_all_started = next((s[0] for s in samples if s[2] >= len(lat_all)), drain_s)
    res = {
        "nodes": args.nodes,
        "gpus": c.total_gpus,
        "jobs": args.jobs,
        "duration_s": args.duration,
        "workers": args.workers,
        "nodes_ready_s": round(ready_s, 1),
        "submit_per_s": round(args.jobs / submit_s, 1),
        "first_pass_admitted": len(first_pass),
        "core_admitted_per_s_peak_5s": round(peak_rate(1), 1),
        "k8s_patches_per_s_peak_5s": round(peak_rate(3), 1),
        "pods_running_per_s_peak_5s": round(peak_rate(2), 1),
        "pods_running_per_s_mean": round(len(lat_all) / t_all_started, 1) if t_all_started else None,
        "latency_submit_to_running_s": {
            "all_p50": round(pct(lat_all, 0.5), 2) if lat_all else None,
            "all_p99": round(pct(lat_all, 0.99), 2) if lat_all else None,
            "first_pass_p50": round(pct(lat_first, 0.5), 2) if lat_first else None,
            "first_pass_p99": round(pct(lat_first, 0.99), 2) if lat_first else None,
        },
        "drain_s": round(drain_s, 1),
        "states": states,
        "longest_tick_s": round(longest_tick, 3),
        "backend": dict(service.backend.stats),
    }
    print(json.dumps(res, indent=2), flush=True)  # before the clean-up, which may be slow at this size
    teardown(api, service, "bench-")
    return res


def teardown(api: Api, service: Service, node_prefix: str) -> None:
    try:
        service.backend.delete_all_jobs(timeout=600)
        delete_nodes(api, node_prefix)
    except KubeApiError as exc:  # the cluster is thrown away anyway
        print(f"(clean-up incomplete: {exc})", flush=True)
    service.backend.close()
    service.store.close()


# --- 2. trace replay vs the simulator ----------------------------------------------------------------------
def bench_replay(api: Api, kubeconfig: str, args, work: Path) -> dict:
    from jupyter_gpusched.sim.engine import CheckpointModel, SimJob, Simulation
    from jupyter_gpusched.sim.scenario import load_scenario
    from jupyter_gpusched.sim.traces import TraceJob

    sc = load_scenario("seed-3x8")
    t0 = min(j.trace.submit for j in sc.jobs)
    window_s = args.replay_hours * 3600
    picked = [j for j in sc.jobs if j.trace.submit - t0 < window_s]
    sp = args.speedup
    jobs: list[SimJob] = []
    for j in picked:
        tr = j.trace
        dur = min(tr.duration, args.replay_max_hours * 3600) / sp
        dur = max(dur, args.replay_min_s)
        t = TraceJob(tr.id, (tr.submit - t0) / sp, dur, tr.gpus, tr.tenant, None, None, "ok", None, None)
        jobs.append(SimJob(t, j.priority, j.preemptible))
    pools = sc.pools_of("dynamic")
    tenants = sc.tenants_for("dynamic")
    # the simulator, on the same compressed jobs, without checkpoints (the kwok pods have none either)
    sim = Simulation(
        jobs,
        pools,
        tenants,
        "dynamic",
        seed=sc.seed,
        config=sc.scheduler,
        checkpoint=CheckpointModel(),
        estimates="none",
    )
    sres = sim.run()
    sim_jobs = {r.id: r for r in sres.jobs}
    # the real cluster: 3 nodes x 8 GPUs in pool `ondemand`
    ns = "bench-replay"
    ensure_namespace(api, ns)
    node_names = [(f"replay-{i}", p.name) for p in pools for i, _ in enumerate(p.nodes)]
    create_nodes(api, node_names)
    wait_ready(api, "replay-", len(node_names))
    service = make_service(
        work / "replay", kubeconfig, ns, [p.pool for p in pools], tenants=tenants, workers=4, tick=0.2
    )
    service.config.tick_interval = 0.2
    print(
        f"[replay] {len(jobs)} jobs of seed-3x8's first {args.replay_hours} h, {sp:g}x faster "
        f"({window_s / sp:.0f} s of arrivals) on {service.scheduler.cluster.total_gpus} GPUs",
        flush=True,
    )
    order = sorted(jobs, key=lambda j: j.trace.submit)
    t_begin = time.time()
    submitted = {}
    i = 0
    deadline = time.monotonic() + args.timeout
    while True:
        now = time.time() - t_begin
        while i < len(order) and order[i].trace.submit <= now:
            sj = order[i]
            job = service.submit(
                notebook="sim.ipynb",
                owner="replay",
                tenant=sj.trace.tenant,
                gpus=sj.trace.gpus,
                priority=sj.priority.label,
                preemptible=sj.preemptible,
                parameters={"sim_duration": sj.trace.duration},
            )
            submitted[sj.trace.id] = job
            i += 1
        service.tick()
        if i == len(order) and all(j.state.terminal for j in submitted.values()):
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    capacity = service.scheduler.cluster.total_gpus

    def summary(jct, gpu_s, first, last):
        span = last - first
        return {
            "jct_mean_s": round(statistics.mean(jct), 2),
            "jct_p50_s": round(pct(jct, 0.5), 2),
            "jct_p95_s": round(pct(jct, 0.95), 2),
            "utilisation": round(gpu_s / (capacity * span), 3) if span > 0 else None,
            "makespan_s": round(span, 1),
        }

    k_jct = [j.finished_at - j.submitted_at for j in submitted.values() if j.finished_at is not None]
    k_gpu_s = sum(j.attained_gpu_s for j in submitted.values())
    k_first = min(j.submitted_at for j in submitted.values())
    k_last = max(j.finished_at for j in submitted.values() if j.finished_at is not None)
    s_jct = [r.jct for r in sim_jobs.values() if r.jct is not None]
    s_gpu_s = sum(r.run_gpu_s for r in sim_jobs.values())
    s_first = min(r.submit for r in sim_jobs.values())
    s_last = max(r.end for r in sim_jobs.values() if r.end is not None)
    kube = summary(k_jct, k_gpu_s, k_first, k_last)
    simu = summary(s_jct, s_gpu_s, s_first, s_last)
    diff = {k: (round((kube[k] - simu[k]) / simu[k], 3) if simu[k] else None) for k in kube}
    res = {
        "window_hours": args.replay_hours,
        "speedup": sp,
        "jobs": len(jobs),
        "finished_on_cluster": len(k_jct),
        "cluster": kube,
        "simulator": simu,
        "relative_difference": diff,
        "preemptions": {
            "cluster": sum(j.preemptions for j in submitted.values()),
            "simulator": sum(r.preemptions for r in sim_jobs.values()),
        },
    }
    print(json.dumps(res, indent=2), flush=True)
    teardown(api, service, "replay-")
    return res


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="use this running cluster instead of starting one")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--duration", type=float, default=30.0, help="mean simulated run time of a job (s)")
    p.add_argument("--workers", type=int, default=16, help="backend API threads")
    p.add_argument("--timeout", type=float, default=1800.0)
    p.add_argument("--no-scale", action="store_true")
    p.add_argument("--no-replay", action="store_true")
    p.add_argument("--replay-hours", type=float, default=4.0)
    p.add_argument("--speedup", type=float, default=60.0)
    p.add_argument("--replay-max-hours", type=float, default=2.0, help="cap trace durations (before compression)")
    p.add_argument("--replay-min-s", type=float, default=1.0, help="floor of compressed durations")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    work = Path(tempfile.mkdtemp(prefix="gpusched-k8s-bench-"))
    cluster_dir = work / "cluster"
    started = False
    kubeconfig = args.kubeconfig
    if not kubeconfig:
        subprocess.run(["bash", str(TESTENV), "build"], check=True)
        subprocess.run(["bash", str(TESTENV), "start", str(cluster_dir)], check=True)
        started = True
        kubeconfig = str(cluster_dir / "kubeconfig")
    api = Api(KubernetesConfig(kubeconfig=kubeconfig, request_timeout=30), pool_size=32)
    out: dict = {
        "kubernetes": subprocess.run(
            [str(testenv_bindir() / "kube-apiserver"), "--version"], capture_output=True, text=True
        ).stdout.strip()
    }
    try:
        if not args.no_replay:
            out["replay"] = bench_replay(api, kubeconfig, args, work)
        if not args.no_scale:
            out["scale"] = bench_scale(api, kubeconfig, args, work)
    finally:
        api.close()
        if started:
            subprocess.run(["bash", str(TESTENV), "stop", str(cluster_dir)])
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
