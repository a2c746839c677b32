"""Our admission vs Kueue's, side by side on one kwok cluster: the same nodes, the same jobs, one run.

    python benchmarks/kueue_bench.py                        # 1,000 nodes x 8 GPUs, 10,000 jobs
    python benchmarks/kueue_bench.py --nodes 50 --jobs 500  # a quick look
    python benchmarks/kueue_bench.py --kueue-qps 50 --kueue-burst 100   # Kueue's client limits as it ships

Needs the test control plane (`scripts/k8s-testenv.sh build`) and Kueue (`scripts/kueue.sh build`, a cold
build takes about 40 minutes). One cluster with N fake nodes (pool `bench`, 8 nvidia.com/gpu each), then:

(a) **ours**: M jobs (1/2/4 GPUs, mixed priorities, simulated run time `--duration` s +-50%, seed 7: the jobs of
    `k8s_bench.py`'s scale part) submitted to the live service (store + core + the kubernetes backend), which
    creates each Job suspended and admits it with its placement patch;
(b) **Kueue** (the real manager, `jupyter_gpusched.testing.kueue`, started after (a) is cleaned up): the same M
    jobs as plain suspended Jobs labelled `kueue.x-k8s.io/queue-name` (and `kueue.x-k8s.io/priority-class`,
    three WorkloadPriorityClasses), created by 16 threads, in one ClusterQueue whose GPU quota is the
    cluster's GPUs (cpu/memory quotas large; no preemption); Kueue unsuspends them and the default
    kube-scheduler binds the pods.

One observer (list + watch of all Jobs and Pods, the backend's own watch code) measures both alike:
admissions (a Job seen with `suspend: false`) per second, peak over 5 s and mean; submit -> pod Running p50/p99
(submit: the `service.submit` call / the Job's POST; Running: the observer sees the pod Running); time to drain
(first submit -> last Job finished); time until 90% of the GPUs are held by bound pods, and the mean share
held until the drain; and GPU over-commitment: at every pod event, the GPUs (limits) of the pods
bound to each node and not finished, never more than the node's 8 (the largest seen is reported).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO.parent))

from k8s_bench import create_nodes, make_service, pct, wait_ready  # noqa: E402

from jupyter_gpusched.backends.kubernetes import Api, KubeApiError, KubernetesConfig  # noqa: E402
from jupyter_gpusched.backends.kubernetes.api import Connection  # noqa: E402
from jupyter_gpusched.backends.kubernetes.names import job_name  # noqa: E402
from jupyter_gpusched.backends.kubernetes.watch import Watcher  # noqa: E402
from jupyter_gpusched.core import Pool  # noqa: E402
from jupyter_gpusched.testing.kueue import API, API_VERSION, apply, make_queues, plain_job, running_kueue  # noqa: E402
from jupyter_gpusched.testing.kwok import GPUS_PER_NODE, TESTENV, ensure_namespace, testenv_bindir  # noqa: E402
from jupyter_gpusched.testing.waits import wait_until  # noqa: E402

PRIORITY_VALUES = {"high": 200, "normal": 100, "low": 0}
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def the_jobs(n: int, duration: float, seed: int = 7) -> list[tuple[int, str, float]]:
    """(gpus, priority, run time s) of each job: the draws, in the order, of k8s_bench.py's scale part."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        gpus = rng.choice((1, 1, 2, 4))
        priority = rng.choice(("high", "normal", "normal", "low"))
        out.append((gpus, priority, duration * rng.uniform(0.5, 1.5)))
    return out


class Observer:
    """Lists and watches every Job and Pod; keeps, per (namespace, Job name), when it was first seen admitted
    (unsuspended), its pod Running and the Job finished, and the GPUs held per node at every pod event."""

    def __init__(self, kubeconfig: str):
        self.cfg = KubernetesConfig(kubeconfig=kubeconfig, request_timeout=30, watch_timeout=300, max_backoff=1.0)
        self.conn = Connection(self.cfg, Api(self.cfg, pool_size=4))
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.admitted: dict[tuple[str, str], float] = {}
        self.running: dict[tuple[str, str], float] = {}
        self.done: dict[tuple[str, str], float] = {}
        self.pods: dict[str, tuple[str, int]] = {}  # uid -> (node, GPUs) of bound, unfinished pods
        self.used: Counter[str] = Counter()
        self.max_node_gpus = 0
        self.over: list[tuple[float, str, int]] = []
        self.busy: list[tuple[float, int]] = [(time.time(), 0)]  # (t, GPUs held by bound pods) at each change
        self.watchers = [
            Watcher(kind, path, None, conn=self.conn, cfg=self.cfg, stopping=self.stopping, on_list=self._list,
                    on_event=self._event)
            for kind, path in (("jobs", "/apis/batch/v1/jobs"), ("pods", "/api/v1/pods"))
        ]  # fmt: skip

    def start(self) -> Observer:
        for w in self.watchers:
            w.start()
        for w in self.watchers:
            w.synced.wait(120)
        return self

    def stop(self) -> None:
        self.stopping.set()
        for w in self.watchers:
            w.interrupt()
        self.conn.close()

    def _list(self, kind: str, path: str, items: list[dict]) -> None:
        for obj in items:
            self._event(kind, "ADDED", obj)

    def _event(self, kind: str, etype: str, obj: dict) -> None:
        now = time.time()
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace", "")
        with self.lock:
            if kind == "jobs":
                key = (ns, meta.get("name", ""))
                if not (obj.get("spec") or {}).get("suspend", False):
                    self.admitted.setdefault(key, now)
                conds = (obj.get("status") or {}).get("conditions") or ()
                if any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conds):
                    self.done.setdefault(key, now)
                return
            labels = meta.get("labels") or {}
            job = next((labels[k] for k in JOB_NAME_LABELS if k in labels), None)
            phase = (obj.get("status") or {}).get("phase")
            if job and phase == "Running":
                self.running.setdefault((ns, job), now)
            uid = meta.get("uid", "")
            node = (obj.get("spec") or {}).get("nodeName")
            holds = etype != "DELETED" and bool(node) and phase not in ("Succeeded", "Failed")
            before = self.pods.pop(uid, None)
            total = self.busy[-1][1]
            if before is not None:
                self.used[before[0]] -= before[1]
                total -= before[1]
            if holds:
                gpus = sum(
                    int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                    for c in (obj.get("spec") or {}).get("containers") or ()
                )
                self.pods[uid] = (node, gpus)
                self.used[node] += gpus
                total += gpus
                if self.used[node] > self.max_node_gpus:
                    self.max_node_gpus = self.used[node]
                if self.used[node] > GPUS_PER_NODE:
                    self.over.append((now, node, self.used[node]))
            if total != self.busy[-1][1]:
                self.busy.append((now, total))

    def summary(self, ns: str, names: list[str], submitted: dict[str, float], gpus: int) -> dict:
        with self.lock:
            adm = sorted(self.admitted[(ns, n)] for n in names if (ns, n) in self.admitted)
            lat = [self.running[(ns, n)] - submitted[n] for n in names if (ns, n) in self.running]
            done = [self.done[(ns, n)] for n in names if (ns, n) in self.done]
            busy = list(self.busy)
        t0 = min(submitted.values())
        t1 = max(done) if done else time.time()
        fill = next((t - t0 for t, g in busy if t >= t0 and g >= 0.9 * gpus), None)
        gpu_s = 0.0  # GPU-seconds held by bound pods between the first submit and the drain
        for (ta, ga), (tb, _) in zip(busy, [*busy[1:], (t1, 0)], strict=True):
            gpu_s += ga * max(0.0, min(tb, t1) - max(ta, t0))
        peak = 0.0
        j = 0
        for i, t in enumerate(adm):  # admissions in any 5 s window
            while adm[j] < t - 5.0:
                j += 1
            peak = max(peak, (i - j + 1) / 5.0)
        return {
            "jobs": len(names),
            "admitted": len(adm),
            "finished": len(done),
            "admissions_per_s_peak_5s": round(peak, 1),
            "admissions_per_s_mean": round(len(adm) / (adm[-1] - t0), 1) if adm and adm[-1] > t0 else None,
            "submit_to_running_p50_s": round(pct(lat, 0.5), 2) if lat else None,
            "submit_to_running_p99_s": round(pct(lat, 0.99), 2) if lat else None,
            "drain_s": round(max(done) - t0, 1) if done else None,
            "to_90pct_gpus_busy_s": round(fill, 1) if fill is not None else None,
            "gpus_busy_mean": round(gpu_s / (gpus * (t1 - t0)), 3) if t1 > t0 else None,
            "submit_s": round(max(submitted.values()) - t0, 1),
        }


def clean(api: Api, ns: str, timeout: float = 900) -> None:
    """Delete every Job of `ns` and wait until its pods are gone (so the next run has the cluster to itself)."""
    try:  # the API server deletes a collection one object at a time before it answers
        api.request(
            "DELETE",
            f"/apis/batch/v1/namespaces/{ns}/jobs",
            query={"propagationPolicy": "Background"},
            timeout=(3.0, timeout),
        )
    except KubeApiError as exc:
        if exc.status != 0:  # not a time-out: the deletion goes on after one
            raise
    wait_until(
        lambda: (
            not any(
                api.request("GET", f"{prefix}/namespaces/{ns}/{kind}", query={"limit": 1})["items"]
                for prefix, kind in (("/apis/batch/v1", "jobs"), ("/api/v1", "pods"))
            )
        ),
        timeout,
        f"the Jobs and pods of {ns} to be deleted",
        1.0,
    )


def run_ours(api: Api, kubeconfig: str, obs: Observer, jobs, args, work: Path) -> dict:
    ns = "side-ours"
    ensure_namespace(api, ns)
    service = make_service(work / "ours", kubeconfig, ns, [Pool("bench")], workers=args.workers)
    names, submitted = [], {}
    for gpus, priority, dur in jobs:
        t = time.time()
        j = service.submit(
            notebook="sim.ipynb", owner="bench", gpus=gpus, priority=priority, parameters={"sim_duration": dur}
        )
        names.append(job_name(j.id))
        submitted[names[-1]] = t
    print(f"[ours] submitted {len(jobs)} jobs in {time.time() - min(submitted.values()):.1f} s", flush=True)
    deadline = time.monotonic() + args.timeout
    while True:
        service.tick()
        with obs.lock:
            left = sum(1 for n in names if (ns, n) not in obs.done)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    res = obs.summary(ns, names, submitted, args.nodes * GPUS_PER_NODE)
    res["backend"] = dict(service.backend.stats)
    print("[ours]", json.dumps(res), flush=True)
    service.backend.close()
    service.store.close()
    clean(api, ns)
    return res


def run_kueue(api: Api, kubeconfig: str, obs: Observer, jobs, args, work: Path, gpus_total: int) -> dict:
    ns = "side-kueue"
    ensure_namespace(api, ns)
    with running_kueue(Path(kubeconfig), work / "kueue", qps=args.kueue_qps, burst=args.kueue_burst) as kueue:
        for name, value in PRIORITY_VALUES.items():
            body = {"apiVersion": API_VERSION, "kind": "WorkloadPriorityClass", "metadata": {"name": name}}
            apply(api, f"{API}/workloadpriorityclasses/{name}", {**body, "value": value})
        make_queues(api, ns, {"bench": gpus_total}, cpu="1M", memory="1000Ti")
        names = [f"kueue-{i:05d}" for i in range(len(jobs))]
        submitted: dict[str, float] = {}

        def post(i: int) -> None:
            gpus, priority, dur = jobs[i]
            body = plain_job(
                names[i], ns, "bench", gpus, duration=dur, labels={"kueue.x-k8s.io/priority-class": priority}
            )
            submitted[names[i]] = time.time()
            for attempt in range(20):
                try:
                    api.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=body)
                    return
                except KubeApiError as exc:
                    if exc.status == 409 or attempt == 19:
                        raise
                    time.sleep(0.5)

        with ThreadPoolExecutor(args.workers) as ex:
            list(ex.map(post, range(len(jobs))))
        print(f"[kueue] created {len(jobs)} Jobs in {time.time() - min(submitted.values()):.1f} s", flush=True)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if not kueue.alive():
                raise RuntimeError(f"the kueue manager exited:\n{kueue.log_tail()}")
            with obs.lock:
                if all((ns, n) in obs.done for n in names):
                    break
            time.sleep(0.5)
        res = obs.summary(ns, names, submitted, gpus_total)
        res["kueue_client_qps_burst"] = [args.kueue_qps, args.kueue_burst]
    print("[kueue]", json.dumps(res), flush=True)
    return res


def table(ours: dict, kueue: dict, over: int, max_node: int) -> str:
    rows = [
        ("admissions/s, peak 5 s", "admissions_per_s_peak_5s"),
        ("admissions/s, mean", "admissions_per_s_mean"),
        ("submit -> Running p50 (s)", "submit_to_running_p50_s"),
        ("submit -> Running p99 (s)", "submit_to_running_p99_s"),
        ("to 90% of GPUs busy (s)", "to_90pct_gpus_busy_s"),
        ("GPUs busy, mean to drain", "gpus_busy_mean"),
        ("time to drain (s)", "drain_s"),
        ("jobs finished", "finished"),
    ]
    out = [f"{'':28} {'ours':>10} {'Kueue':>10} {'ours/Kueue':>11}"]
    for label, key in rows:
        a, b = ours.get(key), kueue.get(key)
        ratio = f"{a / b:.2f}" if isinstance(a, int | float) and isinstance(b, int | float) and b else "-"
        out.append(f"{label:28} {a!s:>10} {b!s:>10} {ratio:>11}")
    out.append(f"GPU over-commitment: {over} node events over {GPUS_PER_NODE} GPUs (most on a node: {max_node})")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=10000)
    p.add_argument("--duration", type=float, default=30.0, help="mean simulated run time of a job (s)")
    p.add_argument("--workers", type=int, default=16, help="backend API threads / Kueue-side creating threads")
    p.add_argument("--kueue-qps", type=float, default=-1.0, help="the manager's client QPS (negative: no limit)")
    p.add_argument("--kueue-burst", type=int, default=1000)
    p.add_argument("--timeout", type=float, default=1800.0, help="per side")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    work = Path(tempfile.mkdtemp(prefix="gpusched-kueue-bench-"))
    cluster_dir = work / "cluster"
    subprocess.run(["bash", str(TESTENV), "start", str(cluster_dir)], check=True)
    kubeconfig = str(cluster_dir / "kubeconfig")
    api = Api(KubernetesConfig(kubeconfig=kubeconfig, request_timeout=30), pool_size=32)
    obs: Observer | None = None
    t_begin = time.monotonic()
    try:
        t0 = time.monotonic()
        create_nodes(api, [(f"bench-{i:04d}", "bench") for i in range(args.nodes)])
        wait_ready(api, "bench-", args.nodes)
        print(f"[setup] {args.nodes} nodes Ready in {time.monotonic() - t0:.1f} s", flush=True)
        jobs = the_jobs(args.jobs, args.duration)
        obs = Observer(kubeconfig).start()
        ours = run_ours(api, kubeconfig, obs, jobs, args, work)
        kueue = run_kueue(api, kubeconfig, obs, jobs, args, work, args.nodes * GPUS_PER_NODE)
        out = {
            "kubernetes": subprocess.run(
                [str(testenv_bindir() / "kube-apiserver"), "--version"], capture_output=True, text=True
            ).stdout.strip(),
            "nodes": args.nodes,
            "gpus": args.nodes * GPUS_PER_NODE,
            "jobs": args.jobs,
            "duration_s": args.duration,
            "ours": ours,
            "kueue": kueue,
            "gpu_overcommit_events": len(obs.over),
            "max_gpus_on_a_node": obs.max_node_gpus,
            "wall_s": round(time.monotonic() - t_begin, 1),
        }
        print(json.dumps(out, indent=2))
        print(table(ours, kueue, len(obs.over), obs.max_node_gpus))
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))
        return 1 if obs.over else 0
    finally:
        if obs is not None:
            obs.stop()
        api.close()
        subprocess.run(["bash", str(TESTENV), "stop", str(cluster_dir)])


if __name__ == "__main__":
    threading.current_thread().name = "bench"
    sys.exit(main())
