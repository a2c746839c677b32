"""Multi-node (gang) jobs on the kubernetes backend: the Indexed Job, its headless Service, torchrun's
environment, the all-or-nothing admission and a node loss (backends/kubernetes/gang.py).

The manifest tests are pure; the cluster tests run on the real test control plane (skipped, with the build
command, when its binaries are not built), as in test_k8s_cluster.py."""

from __future__ import annotations

import time

import pytest

from jupyter_gpusched.backends.kubernetes import KubernetesBackend, KubernetesConfig, build_manifests, placement_patch
from jupyter_gpusched.backends.kubernetes.gang import (
    INDEX_ANNOTATION,
    MASTER_PORT,
    GangError,
    gang_placement,
    gpus_per_node,
    make_gang,
)
from jupyter_gpusched.core import JobSpec, JobState
from jupyter_gpusched.testing.kwok import KwokCluster, make_service, pod_prints, run_until
from jupyter_gpusched.testing.kwok import control_plane_built as _built


def gang_job(cfg: KubernetesConfig | None = None) -> tuple[dict, dict]:
    cfg = cfg or KubernetesConfig(namespace="team")
    job, _ = build_manifests("j1", JobSpec(notebook="train.ipynb", gpus=16), make_notebook_text(), {}, cfg)
    return job, make_gang(job, 2, 8, cfg)


def make_notebook_text() -> str:
    return '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def env_of(job: dict) -> dict[str, dict]:
    return {e["name"]: e for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}


def test_a_gang_is_one_indexed_job_with_torchruns_environment():
    job, svc = gang_job()
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["suspend"] is True and spec["backoffLimit"] == 0
    pod = spec["template"]["spec"]
    assert pod["subdomain"] == svc["metadata"]["name"] == job["metadata"]["name"] == "gpusched-j1"
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"  # per node, not 16
    env = env_of(job)
    assert env["MASTER_ADDR"]["value"] == "gpusched-j1-0.gpusched-j1.team.svc"  # pod 0's stable hostname
    assert env["MASTER_PORT"]["value"] == str(MASTER_PORT)
    assert env["WORLD_SIZE"]["value"] == env["NNODES"]["value"] == "2"
    assert env["NPROC_PER_NODE"]["value"] == "8"
    for rank in ("RANK", "NODE_RANK"):
        assert env[rank]["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.annotations['{INDEX_ANNOTATION}']"
    assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"] is True
    labels = spec["template"]["metadata"]["labels"]
    # Pod anti-affinity cannot change while the Job is suspended: it is there from the start.
    (anti,) = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["labelSelector"]["matchLabels"] == {"gpusched.io/job-id": labels["gpusched.io/job-id"]}
    assert all(labels[k] == v for k, v in svc["spec"]["selector"].items())  # it selects the gang's pods


def test_on_a_shared_volume_each_rank_writes_its_own_folder():
    cfg = KubernetesConfig(output_volume={"persistentVolumeClaim": {"claimName": "out"}})
    job, _ = gang_job(cfg)
    (mount,) = [m for m in job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "output"]
    assert mount == {"name": "output", "mountPath": "/gpusched/output", "subPathExpr": "gpusched-j1/rank-$(RANK)"}


def test_the_admission_patch_allows_exactly_the_chosen_nodes_one_pod_each():
    cfg = KubernetesConfig()
    patch = gang_placement(placement_patch("n1", "p", False, 3, cfg), ("n1", "n2"), "j1")
    tpl = patch["spec"]["template"]
    assert patch["spec"]["suspend"] is False and tpl["metadata"]["annotations"]["gpusched.io/attempt"] == "3"
    terms = tpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert [t["matchFields"] for t in terms] == [
        [{"key": "metadata.name", "operator": "In", "values": [n]}] for n in ("n1", "n2")
    ]  # (ORed; a node-name field selector takes one value)
    (anti,) = tpl["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"] == {"gpusched.io/job-id": "j1"}


def test_uneven_splits_are_refused_with_a_reason():
    assert gpus_per_node((("a", (0, 1, 2, 3)), ("b", (0, 1, 2, 3)))) == 4
    with pytest.raises(GangError, match="multiple of the nodes' GPU count"):
        gpus_per_node((("a", tuple(range(8))), ("b", (0, 1, 2, 3))))


# --- on the test control plane ---------------------------------------------------------------------------
NODES = ("g-1", "g-2", "g-3")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not _built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    c = KwokCluster(tmp_path_factory.mktemp("k8s") / "cluster")
    c.start()
    try:
        for name in NODES:
            c.add_node(name, "on-demand")
        c.wait_ready(NODES)
        yield c
    finally:
        if c.api is not None:
            c.api.close()
        c.script("stop", timeout=120)


def gang_pods(cluster: KwokCluster, ns: str, attempt: int | None = None) -> list[dict]:
    return [
        p
        for p in cluster.pods(ns)
        if not p["metadata"].get("deletionTimestamp")
        and (attempt is None or p["metadata"]["annotations"].get("gpusched.io/attempt") == str(attempt))
    ]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_gang_runs_on_whole_nodes_together_and_requeues_once_when_a_node_is_lost(cluster, tmp_path):
    try:
        gang_loses_a_node(cluster, tmp_path)
    finally:  # the next test needs all three nodes, whatever happened here
        present = {n["metadata"]["name"] for n in cluster.api.request("GET", "/api/v1/nodes")["items"]}
        for name in sorted(set(NODES) - present):
            cluster.add_node(name, "on-demand")
        cluster.wait_ready(NODES)


def gang_loses_a_node(cluster: KwokCluster, tmp_path) -> None:
    ns = cluster.namespace("gang")
    service = make_service(tmp_path, cluster, ns, log_interval=0.5)
    backend = service.backend
    assert isinstance(backend, KubernetesBackend)
    job = service.submit(notebook="sim.ipynb", owner="u", gpus=16, parameters={"sim_duration": 45})
    run_until(service, lambda: job.state is JobState.RUNNING, timeout=60, cluster=cluster, what="gang running")
    nodes = set(job.nodes)
    assert len(nodes) == 2
    pods = [p for p in gang_pods(cluster, ns, 1) if p["status"].get("phase") == "Running"]
    # RUNNING only once both pods run, one on each chosen node, with ranks 0 and 1.
    assert {p["spec"]["nodeName"] for p in pods} == nodes
    assert sorted(p["metadata"]["annotations"][INDEX_ANNOTATION] for p in pods) == ["0", "1"]
    name = backend._state.tracked[job.id].name
    assert {p["spec"]["hostname"] for p in pods} == {f"{name}-0", f"{name}-1"}  # stable per index
    (svc,) = cluster.api.request("GET", f"/api/v1/namespaces/{ns}/services")["items"]
    assert svc["spec"]["clusterIP"] == "None"
    for p in pods:
        env = {e["name"]: e for e in p["spec"]["containers"][0]["env"]}
        assert env["WORLD_SIZE"]["value"] == "2" and env["NPROC_PER_NODE"]["value"] == "8"
        assert env["MASTER_ADDR"]["value"].startswith(p["spec"]["hostname"].rsplit("-", 1)[0] + "-0.")
        assert p["spec"]["subdomain"] == svc["metadata"]["name"]
        assert p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    # The job's log: both pods' logs, each line prefixed by its rank.
    marker = "gang-log-line"
    pod_prints(cluster, marker)
    path = service.log_file(job.id)
    run_until(
        service,
        lambda: all(f"[rank {r}] " in path.read_text() for r in (0, 1)) and marker in path.read_text(),
        timeout=30,
        what="both ranks' logs",
    )
    text = path.read_text()
    assert "all 2 pods running" in text
    assert all(line.startswith("[rank ") for line in text.splitlines() if marker in line), text[-2000:]
    lost = sorted(nodes)[0]
    running = [p for p in gang_pods(cluster, ns, 1) if p["status"].get("phase") == "Running"]
    assert len(running) == 2, "the first attempt ended before the node loss; the test machine is too slow"
    # The rank on the other node finishes first (as a kubelet would report it); the Job counts its index done.
    (done,) = [p for p in running if p["spec"]["nodeName"] != lost]
    finish_pod(cluster, ns, done)
    counted = lambda: (cluster.jobs(ns)[0].get("status") or {}).get("succeeded") == 1  # noqa: E731
    run_until(service, counted, timeout=30, what="the Job to count the finished rank")
    # One node of the gang is gone: the whole gang stops and runs again elsewhere, the finished rank too.
    cluster.delete_node(lost)
    run_until(service, lambda: job.state.terminal, timeout=150, cluster=cluster, what="gang finishes")
    events = [e.dst for e in service.store.events(job.id)]
    assert job.state is JobState.SUCCEEDED, (job.state, job.reason)
    assert events.count(JobState.PREEMPTED) + events.count(JobState.LOST) == 1, events  # requeued once
    assert events.count(JobState.RUNNING) == 2
    second = {p["spec"]["nodeName"] for p in gang_pods(cluster, ns, 2) if p["status"].get("phase") == "Succeeded"}
    assert len(second) == 2 and lost not in second, second  # the whole gang ran again, elsewhere
    backend.delete_all_jobs()
    backend.close()


def finish_pod(cluster: KwokCluster, ns: str, pod: dict) -> None:
    (container,) = pod["spec"]["containers"]
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}
    status = {
        "phase": "Succeeded",
        "containerStatuses": [
            {
                "name": container["name"],
                "image": container["image"],
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"terminated": terminated},
            },
        ],
    }
    path = f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/status"
    cluster.api.request("PATCH", path, body={"status": status}, content_type="application/merge-patch+json")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_gang_that_does_not_fit_starts_no_pod(cluster, tmp_path):
    ns = cluster.namespace("gang-wait")
    service = make_service(tmp_path, cluster, ns)
    backend = service.backend
    blocker = service.submit(notebook="sim.ipynb", owner="u", gpus=8, parameters={"sim_duration": 8})
    run_until(service, lambda: blocker.state is JobState.RUNNING, timeout=60, cluster=cluster, what="blocker")
    # 3 nodes, one taken: a 24-GPU gang waits for all three, and meanwhile not one of its pods exists.
    gang = service.submit(notebook="sim.ipynb", owner="u", gpus=24, parameters={"sim_duration": 2})
    run_until(service, lambda: blocker.state.terminal, timeout=60, cluster=cluster, what="blocker done")
    run_until(service, lambda: gang.state.terminal, timeout=90, cluster=cluster, what="gang done")
    assert gang.state is JobState.SUCCEEDED
    gang_started = min(e.time for e in service.store.events(gang.id) if e.dst is JobState.ADMITTED)
    assert gang_started >= blocker.finished_at
    ran = [p for p in gang_pods(cluster, ns) if p["metadata"]["annotations"].get("gpusched.io/job-id") == gang.id]
    assert len({p["spec"]["nodeName"] for p in ran}) == 3
    backend.delete_all_jobs()
    backend.close()
