"""The kubernetes backend against a real control plane: etcd, kube-apiserver, kube-controller-manager (the Job
controller, garbage collector, PodGC), kube-scheduler, and kwok simulating GPU nodes (nvidia.com/gpu: 8 each).

The binaries are built from Go modules by `scripts/k8s-testenv.sh build` (cached outside the repo); these tests
start a fresh cluster for the module and stop it afterwards. Without the binaries they are skipped with the
command that builds them. Nothing here is mocked: the Jobs, pods, scheduling and GPU accounting are the real
Kubernetes ones; kwok only plays the kubelets, ending each pod after the job's `sim_duration` parameter.

Run as a script (`python tests/test_k8s_cluster.py serve ...`) it is the service process the restart test kills.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from jupyter_gpusched.backends.kubernetes import (
    A_JOB_ID,
    MANAGED_BY,
    MANAGER,
    KubernetesBackend,
    build_manifests,
    split_log_lines,
)
from jupyter_gpusched.backends.kubernetes import KubeApiError as ApiError
from jupyter_gpusched.backends.kubernetes.watch import Relist as _Relist
from jupyter_gpusched.backends.kubernetes.watch import Watcher as _Watcher
from jupyter_gpusched.core import JobSpec, JobState, SpecError, Tenant
from jupyter_gpusched.service import Service
from jupyter_gpusched.store import Store
from jupyter_gpusched.testing.kwok import KwokCluster as TestCluster
from jupyter_gpusched.testing.kwok import (
    backend_config,
    make_service,
    pod_prints,
    run_until,
    running_cluster,
    simulate,
)
from jupyter_gpusched.testing.kwok import control_plane_built as _built
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.service import service_in

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not _built():
        pytest.skip(
            "the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build` "
            "(builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from Go modules; "
            "the first build takes a long time, then it is cached)"
        )
    with running_cluster(tmp_path_factory.mktemp("k8s") / "cluster") as c:
        yield c


def first_admitted(service: Service, job_id: str) -> float:
    return min(e.time for e in service.store.events(job_id) if e.dst is JobState.ADMITTED)


def cleanup(service: Service, cluster: TestCluster, ns: str) -> None:
    backend = service.backend
    backend.delete_all_jobs()
    backend.close()
    # Pods of a deleted node would wait for PodGC (40 s and more): remove them now.
    cluster.api.request("DELETE", f"/api/v1/namespaces/{ns}/pods", query={"gracePeriodSeconds": 0})
    deadline = time.monotonic() + 60
    while cluster.jobs(ns) or cluster.gpus_in_use():
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)


# --- the scheduler on a real cluster -------------------------------------------------------------------------
def test_fifty_mixed_jobs_all_finish_high_priority_first(cluster, tmp_path):
    ns = cluster.namespace("fifty")
    service = make_service(tmp_path, cluster, ns)
    assert service.scheduler.cluster.total_gpus == 24
    assert {service.scheduler.cluster.pool_of(n) for n in ("od-1", "od-2", "spot-1")} == {"on-demand", "spot"}
    jobs = []
    # Lowest priority first, so the queue order alone would favour them.
    for i in range(22):
        jobs.append(
            service.submit(
                notebook="sim.ipynb",
                owner="u",
                gpus=(1, 2, 4)[i % 3],
                priority="low",
                preemptible=i % 2 == 0,
                parameters={"sim_duration": 1 + i % 3},
            )
        )
    for i in range(20):
        jobs.append(
            service.submit(
                notebook="sim.ipynb",
                owner="u",
                gpus=(1, 2, 4, 1)[i % 4],
                priority="normal",
                preemptible=i % 3 == 0,
                parameters={"sim_duration": 1 + i % 2},
            )
        )
    for i in range(8):  # 12 GPUs in all: they fit the on-demand pool together
        jobs.append(
            service.submit(
                notebook="sim.ipynb", owner="u", gpus=(1, 2)[i % 2], priority="high", parameters={"sim_duration": 2}
            )
        )
    run_until(service, lambda: all(j.state.terminal for j in jobs), timeout=150, cluster=cluster, what="50 jobs")
    assert Counter(j.state for j in jobs) == {JobState.SUCCEEDED: 50}
    admitted = {j.id: first_admitted(service, j.id) for j in jobs}
    high = [admitted[j.id] for j in jobs if j.spec.priority.label == "high"]
    low = [admitted[j.id] for j in jobs if j.spec.priority.label == "low"]
    assert max(high) <= min(low), "a low-priority job was admitted while a high-priority one waited"
    # Every job ran as exactly one Job with one successful pod, placed where the core said.
    k8s_jobs = {j["metadata"]["annotations"][A_JOB_ID]: j for j in cluster.jobs(ns)}
    assert set(k8s_jobs) == {j.id for j in jobs}
    assert all(j["status"].get("succeeded") == 1 for j in k8s_jobs.values())
    pods_ok = Counter(
        p["metadata"]["annotations"][A_JOB_ID]
        for p in cluster.pods(ns)
        if p["status"].get("phase") == "Succeeded" and not p["metadata"].get("deletionTimestamp")
    )
    assert all(pods_ok[j.id] == 1 for j in jobs)
    cleanup(service, cluster, ns)


def test_borrower_is_preempted_when_the_owner_needs_its_quota(cluster, tmp_path):
    ns = cluster.namespace("quota")
    tenants = (Tenant("research", quota=16), Tenant("interns", quota=8))
    service = make_service(tmp_path, cluster, ns, tenants=tenants)
    interns = [
        service.submit(notebook="sim.ipynb", owner="i", tenant="interns", gpus=4, parameters={"sim_duration": 120})
        for _ in range(4)
    ]
    # Non-preemptible jobs use only the 16 on-demand GPUs: 8 within the quota, 8 borrowed from research.
    run_until(
        service,
        lambda: sum(j.state is JobState.RUNNING for j in interns) == 4,
        timeout=60,
        cluster=cluster,
        what="interns running",
    )
    borrowed = {j.id for j in interns if j.borrowed}
    assert len(borrowed) == 2
    research = [
        service.submit(notebook="sim.ipynb", owner="r", tenant="research", gpus=4, parameters={"sim_duration": 2})
        for _ in range(2)
    ]
    run_until(
        service,
        lambda: all(j.state is JobState.SUCCEEDED for j in research),
        timeout=60,
        cluster=cluster,
        what="research jobs",
    )
    preempted = {j.id for j in interns if any(e.dst is JobState.PREEMPTED for e in service.store.events(j.id))}
    assert preempted == borrowed
    # Preemption is `suspend: true` on the borrower's Job: its pod went away, the Job stays.
    k8s = {j["metadata"]["annotations"][A_JOB_ID]: j for j in cluster.jobs(ns)}
    assert set(preempted) <= set(k8s)
    # Cancel deletes the Jobs with propagation: Job, pods and ConfigMap all go.
    for j in interns:
        service.cancel(j.id, actor="test")
    run_until(
        service,
        lambda: not any(j["metadata"]["annotations"][A_JOB_ID] in {x.id for x in interns} for j in cluster.jobs(ns)),
        timeout=30,
        what="cancelled Jobs deleted",
    )
    deadline = time.monotonic() + 60
    while any(p["metadata"]["annotations"][A_JOB_ID] in {x.id for x in interns} for p in cluster.pods(ns)):
        assert time.monotonic() < deadline, "pods of cancelled jobs remain"
        service.tick()
        time.sleep(0.2)
    cms = cluster.api.request(
        "GET", f"/api/v1/namespaces/{ns}/configmaps", query={"labelSelector": f"{MANAGED_BY}={MANAGER}"}
    )["items"]
    assert not any(c["metadata"]["annotations"][A_JOB_ID] in {x.id for x in interns} for c in cms)
    cleanup(service, cluster, ns)


def test_jobs_on_a_deleted_spot_node_resume_elsewhere(cluster, tmp_path):
    ns = cluster.namespace("spot")
    cluster.add_node("spot-2", "spot", spot=True)
    cluster.wait_ready(["spot-2"])
    service = make_service(tmp_path, cluster, ns)
    assert "spot-2" in service.scheduler.cluster
    jobs = [
        service.submit(notebook="sim.ipynb", owner="u", gpus=4, preemptible=True, parameters={"sim_duration": 8})
        for _ in range(4)
    ]
    run_until(
        service,
        lambda: all(j.state is JobState.RUNNING for j in jobs),
        timeout=60,
        cluster=cluster,
        what="spot jobs running",
    )
    assert all(service.scheduler.cluster.pool_of(j.nodes[0]) == "spot" for j in jobs)  # cheap capacity first
    on_node = {j.id for j in jobs if j.nodes == ("spot-2",)}
    assert on_node
    cluster.delete_node("spot-2")  # the cloud took the spot instance back
    run_until(service, lambda: "spot-2" not in service.scheduler.cluster, timeout=30, what="node loss seen")
    run_until(
        service, lambda: all(j.state.terminal for j in jobs), timeout=90, cluster=cluster, what="spot jobs finish"
    )
    assert all(j.state is JobState.SUCCEEDED for j in jobs)
    for j in jobs:
        events = [e.dst for e in service.store.events(j.id)]
        assert (JobState.PREEMPTED in events) == (j.id in on_node)
        assert JobState.FAILED not in events and JobState.LOST not in events
    # The resumed attempts really ran on other nodes.
    pods = cluster.pods(ns)
    # (kwok may still finish a pod it had timed before its node went: that pod was deleted, it does not count)
    ran_on = {
        p["metadata"]["annotations"][A_JOB_ID]: p["spec"]["nodeName"]
        for p in pods
        if p["status"].get("phase") == "Succeeded" and not p["metadata"].get("deletionTimestamp")
    }
    assert all(ran_on[j] != "spot-2" for j in on_node), [
        (
            p["metadata"]["annotations"][A_JOB_ID],
            p["spec"]["nodeName"],
            p["status"].get("phase"),
            p["metadata"].get("deletionTimestamp"),
            p["metadata"]["annotations"].get("gpusched.io/attempt"),
        )
        for p in pods
    ]
    cleanup(service, cluster, ns)


def test_an_evicted_pod_requeues_its_job(cluster, tmp_path):
    ns = cluster.namespace("evict")
    service = make_service(tmp_path, cluster, ns)
    job = service.submit(notebook="sim.ipynb", owner="u", gpus=2, parameters={"sim_duration": 5})
    run_until(service, lambda: job.state is JobState.RUNNING, timeout=30, what="running")
    (pod,) = [p for p in cluster.pods(ns) if p["status"].get("phase") == "Running"]
    name = pod["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    cluster.api.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body=eviction)  # a node drain
    run_until(service, lambda: job.state.terminal, timeout=60, cluster=cluster, what="evicted job finishes")
    events = [e for e in service.store.events(job.id)]
    assert job.state is JobState.SUCCEEDED
    assert any(e.dst is JobState.PREEMPTED and "evicted" in e.reason for e in events)
    assert not any(e.dst in (JobState.FAILED, JobState.LOST) for e in events)
    (kj,) = cluster.jobs(ns)
    assert not kj["status"].get("failed")  # the eviction was not counted against backoffLimit
    cleanup(service, cluster, ns)


def test_service_killed_mid_run_reconciles_without_loss_or_duplicates(cluster, tmp_path):
    ns = cluster.namespace("restart")
    data = tmp_path / "svc"
    args = [
        sys.executable,
        __file__,
        "serve",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--namespace",
        ns,
        "--dir",
        str(data),
    ]
    log1 = open(tmp_path / "serve1.log", "w")
    first = subprocess.Popen([*args, "--submit", "12"], stdout=log1, stderr=subprocess.STDOUT, start_new_session=True)
    store_url = f"sqlite:///{data / 'data' / 'db.sqlite'}"
    try:
        deadline = time.monotonic() + 90
        while True:  # wait until several run and one has finished
            running = [
                p
                for p in cluster.pods(ns)
                if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
            ]
            done = [p for p in cluster.pods(ns) if p["status"].get("phase") == "Succeeded"]
            if len(running) >= 3 and done:
                break
            assert first.poll() is None, (tmp_path / "serve1.log").read_text()
            assert time.monotonic() < deadline, "jobs never started"
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # no shutdown, no goodbye
        first.wait()
    store = Store(store_url)
    ids = [job.id for job, _ in store.load_jobs()]
    store.close()
    assert len(ids) == 12
    # While it is down: a Job of a running job vanishes, a stray Job appears, and running ones finish.
    victim = running[0]["metadata"]["annotations"][A_JOB_ID]
    victim_job = next(j for j in cluster.jobs(ns) if j["metadata"]["annotations"][A_JOB_ID] == victim)
    cluster.api.request(
        "DELETE",
        f"/apis/batch/v1/namespaces/{ns}/jobs/{victim_job['metadata']['name']}",
        query={"propagationPolicy": "Background"},
    )
    cfg = backend_config(cluster, ns)
    stray, _ = build_manifests("stray-job", JobSpec(notebook="x.ipynb"), "{}", {}, cfg)
    stray["spec"]["suspend"] = False
    stray["spec"]["template"]["spec"]["nodeSelector"] = {"gpusched.io/pool": "on-demand"}
    stray["spec"]["template"]["metadata"]["annotations"]["gpusched.io/sim-duration"] = "600s"
    cluster.api.request("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=stray)
    time.sleep(4)

    log2 = open(tmp_path / "serve2.log", "w")
    second = subprocess.run([*args, "--until-done", "120"], stdout=log2, stderr=subprocess.STDOUT, timeout=180)
    assert second.returncode == 0, (tmp_path / "serve2.log").read_text()[-3000:]
    store = Store(store_url)
    rows = {job.id: job for job, _ in store.load_jobs()}
    assert {j.state for j in rows.values()} == {JobState.SUCCEEDED}, {j.id: j.state for j in rows.values()}
    victim_events = [e.dst for e in store.events(victim)]
    assert JobState.PREEMPTED in victim_events and victim_events[-1] is JobState.SUCCEEDED
    assert all(JobState.LOST not in [e.dst for e in store.events(i)] for i in ids)
    store.close()
    k8s = Counter(j["metadata"]["annotations"][A_JOB_ID] for j in cluster.jobs(ns))
    assert "stray-job" not in k8s  # a Job with no store row is deleted
    assert set(k8s) == set(ids) and all(n == 1 for n in k8s.values())  # one Job per job
    succeeded = Counter(
        p["metadata"]["annotations"][A_JOB_ID]
        for p in cluster.pods(ns)
        if p["status"].get("phase") == "Succeeded" and not p["metadata"].get("deletionTimestamp")
    )
    assert all(succeeded[i] == 1 for i in ids), succeeded  # none ran twice to completion
    KubernetesBackend(backend_config(cluster, ns), start=False).delete_all_jobs()


def test_api_server_down_for_30_seconds(cluster, tmp_path):
    ns = cluster.namespace("outage")
    service = make_service(tmp_path, cluster, ns)
    # (8 x 2 GPUs fill the on-demand nodes; the job submitted during the outage waits for them)
    jobs = [service.submit(notebook="sim.ipynb", owner="u", gpus=2, parameters={"sim_duration": 6}) for _ in range(8)]
    run_until(service, lambda: all(j.state is JobState.RUNNING for j in jobs), timeout=60, what="jobs running")
    cluster.script("apiserver", "stop")
    try:
        t_end = time.monotonic() + 30
        longest = 0.0
        late = None
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            service.tick()  # never raises, never blocks on the dead API server
            longest = max(longest, time.monotonic() - t0)
            assert service.cluster()["total_gpus"] == 24  # the REST API's views keep answering
            if late is None and time.monotonic() > t_end - 20:
                late = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 1})
            time.sleep(0.1)
        assert not service.backend.api_up
        assert longest < 1.0, f"a tick took {longest:.2f} s during the outage"
        assert not any(j.state in (JobState.LOST, JobState.FAILED) for j in jobs)
    finally:
        cluster.script("apiserver", "start")
    t_back = time.monotonic()
    jobs.append(late)
    run_until(service, lambda: all(j.state.terminal for j in jobs), timeout=120, cluster=cluster, what="work resumes")
    print(f"outage test: all done {time.monotonic() - t_back:.1f} s after the API server was back")
    assert all(j.state is JobState.SUCCEEDED for j in jobs)
    assert all(JobState.LOST not in [e.dst for e in service.store.events(j.id)] for j in jobs)
    assert service.backend.api_up
    cleanup(service, cluster, ns)


def test_bad_specs_come_back_as_the_api_servers_own_messages(cluster, tmp_path):
    ns = cluster.namespace("badspec")
    tenants = (Tenant("default", quota=24), Tenant("ghost", quota=0))
    service = make_service(tmp_path, cluster, ns, tenants=tenants, tenant_namespaces={"ghost": "no-such-namespace"})
    run_until(service, lambda: service.backend.api_up, timeout=10)
    root = service.config.root_dir
    # 1. A notebook too big for a ConfigMap: the API server's validation says so, at submit (-> HTTP 400).
    make_notebook(root / "huge.ipynb", "x = '" + "a" * (1100 * 1024) + "'")
    with pytest.raises(SpecError) as err:
        service.submit(notebook="huge.ipynb", owner="u")
    assert "rejected the ConfigMap (422 Invalid)" in err.value.message
    assert "Too long: may not be more than 1048576 bytes" in err.value.message or "1048576" in err.value.message
    # 2. A tenant whose namespace does not exist.
    with pytest.raises(SpecError) as err:
        service.submit(notebook="sim.ipynb", owner="u", tenant="ghost")
    assert "404" in err.value.message and 'namespaces "no-such-namespace" not found' in err.value.message
    assert not service.scheduler.jobs  # nothing was queued
    # 3. An operator setting the API server refuses (a bad quantity): reported when the Job is created too.
    bad = KubernetesBackend(
        backend_config(cluster, ns, container_resources={"requests": {"cpu": "lots"}}), pod_customizer=simulate
    )
    with pytest.raises(SpecError) as err:
        make_service(tmp_path / "b", cluster, ns, backend=bad).submit(notebook="sim.ipynb", owner="u")
    assert (
        "rejected the Job (400 BadRequest)" in err.value.message
        and "quantities must match the regular expression" in err.value.message
    )
    bad.api_up = False  # as if the API server had been unreachable at submit: the create itself is refused
    svc = make_service(tmp_path / "c", cluster, ns, backend=bad)
    job = svc.submit(notebook="sim.ipynb", owner="u")
    bad.api_up = True
    run_until(svc, lambda: job.state.terminal, timeout=30, what="refused job fails")
    assert job.state is JobState.FAILED and "quantities must match the regular expression" in job.reason
    bad.close()
    cleanup(service, cluster, ns)


def test_failures_and_max_runtime_come_back_with_their_reasons(cluster, tmp_path):
    ns = cluster.namespace("failures")
    service = make_service(tmp_path, cluster, ns)
    crash = service.submit(
        notebook="sim.ipynb", owner="u", max_retries=1, parameters={"sim_duration": 0.5, "sim_fail": True}
    )
    slow = service.submit(notebook="sim.ipynb", owner="u", max_runtime=2, parameters={"sim_duration": 60})
    run_until(
        service, lambda: crash.state.terminal and slow.state.terminal, timeout=60, cluster=cluster, what="failures"
    )
    assert crash.state is JobState.FAILED and "BackoffLimitExceeded" in crash.reason and "exit code 1" in crash.reason
    pods = [p for p in cluster.pods(ns) if p["metadata"]["annotations"][A_JOB_ID] == crash.id]
    assert len(pods) == 1  # backoffLimit 0: a notebook that fails is not re-run, whatever its max_retries
    assert slow.state is JobState.FAILED and slow.reason == "max_runtime exceeded (2 s)"
    log = (Path(service.info[crash.id].job_dir) / "log.txt").read_text()
    assert "admitted to" in log and "the Job failed" in log
    cleanup(service, cluster, ns)


def pod_log_texts(cluster: TestCluster) -> list[str]:
    return [line.split(" ", 3)[3] for line in (cluster.dir / "pod-logs" / "container.log").read_text().splitlines()]


def test_log_fetches_resume_after_the_last_line_copied():  # (no cluster needed)
    log = (
        b"2026-12-03T01:40:26.000000001Z a\n2026-12-03T01:40:26.1Z b\n2026-12-03T01:40:26.1Z b\n"
        b"2026-12-03T01:40:27Z c\n"
    )
    lines, since, n, sec = split_log_lines(log, -1, 0, False)
    assert lines == [b"a", b"b", b"b", b"c"] and n == 1 and sec == len(b"2026-12-03T01:40:27Z c\n")
    assert split_log_lines(log, since, n, False, sec)[0] == []  # the same fetch again: nothing new
    # A fetch cut by limitBytes leaves its unfinished line for the next one; equal timestamps are counted.
    lines, since, n, sec = split_log_lines(log[:70], -1, 0, True)
    assert lines == [b"a", b"b"] and n == 1
    assert split_log_lines(log + b"2026-12-03T01:40:27Z d\n", since, n, False, sec)[0] == [b"b", b"c", b"d"]
    # One line longer than the limit is kept, cut, rather than fetched for ever.
    assert split_log_lines(log[:20], -1, 0, True)[0] == [b"2026-12-03T01:40:26."]


def test_pod_logs_are_copied_into_the_job_log_once_each(cluster, tmp_path):
    ns = cluster.namespace("podlogs")
    # A small limitBytes, so the copy has to page through the log in several fetches.
    service = make_service(tmp_path, cluster, ns, log_interval=0.5, log_limit_bytes=1024)
    job = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 8})
    run_until(service, lambda: job.state is JobState.RUNNING, timeout=30, what="running")
    path = service.log_file(job.id)
    seeded = pod_log_texts(cluster)
    run_until(
        service, lambda: path.is_file() and seeded[-1] in path.read_text(), timeout=15, what="the pod's first lines"
    )
    # The panel follows the log with GET .../log?offset=N; read it the way that handler does, while lines arrive.
    followed, offset = b"", 0

    def follow() -> None:
        nonlocal followed, offset
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
        followed += data
        offset += len(data)

    live = []
    for i in range(6):  # 60 lines of ~70 bytes, 10 at a time, many within one second
        batch = [f"step {i * 10 + k:03d}: loss={1 / (i * 10 + k + 1):.6f} " + "x" * 30 for k in range(10)]
        pod_prints(cluster, *batch)
        live += batch
        run_until(service, lambda t_end=time.monotonic() + 0.4: time.monotonic() > t_end, timeout=5)
        follow()
    run_until(service, lambda: job.state.terminal, timeout=60, what="job finishes")
    assert job.state is JobState.SUCCEEDED
    run_until(service, lambda: live[-1] in path.read_text(), timeout=15, what="the last lines")
    time.sleep(1.5)  # the final fetch and any late one: nothing more may arrive
    service.tick()
    follow()
    text = path.read_text()
    assert followed.decode() == text
    lines = text.splitlines()
    expected = seeded + live
    for t in expected:
        assert lines.count(t) == 1, (t, lines.count(t))
    assert [x for x in lines if x in expected] == expected  # in the pod's order
    headers = [x for x in lines if "----- attempt" in x]
    assert len(headers) == 1 and "attempt 1: log of pod gpusched-" in headers[0]
    assert lines.index(headers[0]) < lines.index(expected[0])
    assert "admitted to" in text and "the Job completed" in text

    # A requeued job: its second pod's log follows a separator naming attempt 2.
    job2 = service.submit(notebook="sim.ipynb", owner="u", gpus=2, parameters={"sim_duration": 5})
    run_until(service, lambda: job2.state is JobState.RUNNING, timeout=30, what="job 2 running")
    path2 = service.log_file(job2.id)
    everything = pod_log_texts(cluster)
    run_until(
        service, lambda: path2.is_file() and everything[-1] in path2.read_text(), timeout=15, what="job 2's lines"
    )
    (pod,) = [
        p
        for p in cluster.pods(ns)
        if p["status"].get("phase") == "Running" and p["metadata"]["annotations"][A_JOB_ID] == job2.id
    ]
    name = pod["metadata"]["name"]
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": ns}}
    cluster.api.request("POST", f"/api/v1/namespaces/{ns}/pods/{name}/eviction", body=eviction)
    run_until(service, lambda: job2.state.terminal, timeout=60, what="requeued job finishes")
    assert job2.state is JobState.SUCCEEDED
    run_until(
        service,
        lambda: any(everything[-1] in part for part in path2.read_text().split("----- attempt 2")[1:]),
        timeout=15,
        what="the second pod's lines",
    )
    time.sleep(1.5)
    lines = path2.read_text().splitlines()
    h1, h2 = [i for i, x in enumerate(lines) if "----- attempt" in x]
    assert "attempt 1: log of pod" in lines[h1] and name in lines[h1]
    assert "attempt 2: log of pod" in lines[h2] and name not in lines[h2]
    for section in (lines[h1:h2], lines[h2:]):
        assert [x for x in section if x in everything] == everything  # each line once per attempt, in order
    assert any("evicted" in x for x in lines[h1:h2])
    cleanup(service, cluster, ns)


def test_pools_take_their_gpu_type_from_gpu_feature_discovery_labels(cluster, tmp_path):
    """Nodes labelled nvidia.com/gpu.product give their pool a GPU type (the lab form offers it);
    a pool whose nodes disagree gets none."""
    ns = cluster.namespace("gputype")
    nodes = {
        "gfd-a100-1": ("a100", "NVIDIA-A100-SXM4-80GB"),
        "gfd-a100-2": ("a100", "NVIDIA-A100-SXM4-80GB"),
        "gfd-mix-1": ("mixed", "NVIDIA-A100-SXM4-80GB"),
        "gfd-mix-2": ("mixed", "NVIDIA-H100-80GB-HBM3"),
    }
    backend = None
    try:
        for name, (pool, product) in nodes.items():
            cluster.add_node(name, pool)
            patch = {"metadata": {"labels": {"nvidia.com/gpu.product": product}}}
            cluster.api.request(
                "PATCH", f"/api/v1/nodes/{name}", body=patch, content_type="application/merge-patch+json"
            )
        cluster.wait_ready(list(nodes))
        backend = KubernetesBackend(backend_config(cluster, ns))
        deadline = time.monotonic() + 30
        while {"a100", "mixed"} - {p.name for p in backend.pools()} and time.monotonic() < deadline:
            time.sleep(0.2)
        pools = {p.name: p for p in backend.pools()}
        assert pools["a100"].gpu_type == "NVIDIA-A100-SXM4-80GB"
        assert pools["mixed"].gpu_type is None
        assert all(p.gpu_type is None for name, p in pools.items() if name not in ("a100", "mixed"))  # no label
    finally:
        if backend is not None:
            backend.close()
        for name in nodes:
            cluster.delete_node(name)


def test_gfd_facts_mig_slices_and_the_gpu_taint_on_a_real_scheduler(cluster, tmp_path):
    """GPU feature discovery labels make a pool's type and memory (GET cluster shows them); a MIG node's
    nvidia.com/mig-1g.10gb slices are a GPU type of their own, and a job asking for it requests that resource
    and runs there; a node tainted nvidia.com/gpu:NoSchedule runs jobs (kube-scheduler checks the toleration)."""
    ns = cluster.namespace("gpufacts")
    gfd = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.memory": "81559"}
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    cluster.add_node("gfd-h100-1", "h100", labels={**gfd, "nvidia.com/gpu.count": "8"}, taints=taint)
    cluster.add_node(
        "mig-a100-1",
        "a100mig",
        gpus=4,
        labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        extra_resources={"nvidia.com/mig-1g.10gb": 7},
    )
    names = ["gfd-h100-1", "mig-a100-1"]
    service = backend = None
    try:
        # (ready_nodes leaves out nodes with node.kubernetes.io/* taints only: ours counts as ready)
        cluster.wait_ready(names)
        backend = KubernetesBackend(backend_config(cluster, ns), pod_customizer=simulate)
        deadline = time.monotonic() + 30
        while {"h100", "a100mig/mig-1g.10gb"} - {p.name for p in backend.pools()} and time.monotonic() < deadline:
            time.sleep(0.2)
        found = {p.name: p for p in backend.pools()}
        assert (found["h100"].gpu_type, found["h100"].gpu_memory_mib, found["h100"].node_gpus) == (
            "NVIDIA-H100-80GB-HBM3",
            81559,
            8,
        )
        mig = found["a100mig/mig-1g.10gb"]
        assert (mig.gpu_type, mig.gpu_memory_mib) == ("mig-1g.10gb", 10240)
        assert found["a100mig"].gpu_type == "NVIDIA-A100-SXM4-80GB"
        make_notebook(tmp_path / "root" / "sim.ipynb", "print('simulated')", parameters="sim_duration = 1")
        service = service_in(tmp_path, backend, pools=tuple(found.values()), memory_check_interval=3600.0)
        view = {p["name"]: p for p in service.cluster()["pools"]}
        assert view["h100"]["gpu_memory_mib"] == 81559 and view["a100mig/mig-1g.10gb"]["gpu_type"] == "mig-1g.10gb"
        nodes = {n["name"]: n for n in service.cluster()["nodes"]}
        assert nodes["mig-a100-1/mig-1g.10gb"]["gpus"] == 7 and nodes["mig-a100-1"]["gpus"] == 4
        sliced = service.submit(notebook="sim.ipynb", owner="u", gpus=2, gpu_type="mig-1g.10gb")
        h100 = service.submit(notebook="sim.ipynb", owner="u", gpus=8, gpu_type="NVIDIA-H100-80GB-HBM3")
        run_until(
            service,
            lambda: sliced.state.terminal and h100.state.terminal,
            timeout=60,
            cluster=cluster,
            what="MIG and tainted-node jobs finish",
        )
        assert sliced.state is JobState.SUCCEEDED and h100.state is JobState.SUCCEEDED
        pods = {p["metadata"]["annotations"][A_JOB_ID]: p for p in cluster.pods(ns)}
        assert pods[sliced.id]["spec"]["nodeName"] == "mig-a100-1"
        limits = pods[sliced.id]["spec"]["containers"][0]["resources"]["limits"]
        assert limits.get("nvidia.com/mig-1g.10gb") == "2" and "nvidia.com/gpu" not in limits
        assert pods[h100.id]["spec"]["nodeName"] == "gfd-h100-1"
    finally:
        if service is not None:
            cleanup(service, cluster, ns)
        elif backend is not None:
            backend.close()
        for name in names:
            cluster.delete_node(name)


def test_printed_manifest_is_accepted_by_the_api_server(cluster, tmp_path):
    import yaml

    nb = make_notebook(tmp_path / "Odd name (1).ipynb", "print(1)")
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "manifest", str(nb), "--gpus", "2", "--job-id", "Weird/ID 1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for doc in yaml.safe_load_all(out):
        path = (
            "/apis/batch/v1/namespaces/default/jobs"
            if doc["kind"] == "Job"
            else "/api/v1/namespaces/default/configmaps"
        )
        cluster.api.request("POST", path, body=doc, query={"dryRun": "All"})


def test_watch_relists_when_its_version_has_expired(cluster, tmp_path):
    ns = cluster.namespace("relist")
    backend = KubernetesBackend(backend_config(cluster, ns))
    try:
        assert backend.wait_synced(30)
        w = next(w for w in backend._watchers if w.kind == "job")
        before = w.relists
        with pytest.raises((_Relist, ApiError)) as err:
            w._watch("1")  # far older than anything the API server still has
        assert isinstance(err.value, _Relist) or err.value.gone
        assert w.relists == before  # the watcher's own loop re-lists on this; _watch alone does not
        assert isinstance(w, _Watcher)
    finally:
        backend.close()


# --- the service process the restart test starts and kills --------------------------------------------------
def _serve(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--namespace", required=True)
    p.add_argument("--dir", required=True)
    p.add_argument("--submit", type=int, default=0)
    p.add_argument("--until-done", type=float, default=0.0)
    a = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("jupyter_gpusched.backends.kubernetes").setLevel(logging.DEBUG)
    c = TestCluster(Path(a.kubeconfig).parent)
    service = make_service(Path(a.dir), c, a.namespace)
    for i in range(a.submit):
        service.submit(notebook="sim.ipynb", owner="u", gpus=(1, 2, 4)[i % 3], parameters={"sim_duration": 5 + i % 4})
    deadline = time.monotonic() + (a.until_done or 1e9)
    while True:
        service.tick()
        if a.until_done and service.scheduler.jobs and all(j.state.terminal for j in service.scheduler.jobs.values()):
            service.backend.close()
            return 0
        if time.monotonic() > deadline:
            print({j.id: j.state.value for j in service.scheduler.jobs.values()}, flush=True)
            return 1
        time.sleep(0.05)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_serve(sys.argv[2:]))
