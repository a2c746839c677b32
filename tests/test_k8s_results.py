"""Results of Kubernetes jobs without a shared volume: the adopted jobs' pod-log copy (and, below, the upload).

Cluster tests run on the real test control plane (skipped, with the build command, when its binaries are not
built), as in test_k8s_cluster.py."""

from __future__ import annotations

import time

import pytest

from jupyter_gpusched.backends.kubernetes import KubernetesBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kwok import NODES, backend_config, make_service, run_until, simulate
from jupyter_gpusched.testing.kwok import KwokCluster as TestCluster
from jupyter_gpusched.testing.kwok import control_plane_built as _built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not _built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    c = TestCluster(tmp_path_factory.mktemp("k8s") / "cluster")
    c.start()
    try:
        for name, pool, spot in NODES:
            c.add_node(name, pool, spot)
        c.wait_ready([n for n, _, _ in NODES])
        yield c
    finally:
        if c.api is not None:
            c.api.close()
        c.script("stop", timeout=120)


def pod_prints(cluster: TestCluster, *texts: str) -> None:
    """Every pod "prints" these lines: kwok serves this CRI-format file as each container's log."""
    with open(cluster.dir / "pod-logs" / "container.log", "a", encoding="utf-8") as f:
        for text in texts:
            ns = time.time_ns()
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ns // 10**9)) + f".{ns % 10**9:09d}Z"
            f.write(f"{stamp} stdout F {text}\n")


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_an_adopted_job_gets_its_pod_log_copy_from_where_it_stopped(cluster, tmp_path):
    ns = cluster.namespace("adopt-logs")
    service = make_service(tmp_path, cluster, ns, log_interval=0.3)
    job = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 25})
    run_until(service, lambda: job.state is JobState.RUNNING, timeout=30, what="running")
    path = service.log_file(job.id)
    pod_prints(cluster, "before-restart-1", "before-restart-2")
    run_until(service, lambda: "before-restart-2" in path.read_text(), timeout=20, what="first lines copied")
    service.backend.close()  # the service goes away; the Job keeps running
    time.sleep(0.5)
    pod_prints(cluster, "while-down")

    backend = KubernetesBackend(backend_config(cluster, ns, log_interval=0.3), pod_customizer=simulate)
    service2 = make_service(tmp_path, cluster, ns, backend=backend)  # the same store and job folders
    job2 = service2.get(job.id)
    assert job2.state is JobState.RUNNING  # adopted
    pod_prints(cluster, "after-restart")
    run_until(service2, lambda: "after-restart" in path.read_text(), timeout=30, what="copy goes on after adoption")
    text = path.read_text()
    for line in ("before-restart-1", "before-restart-2", "while-down", "after-restart"):
        assert sum(1 for row in text.splitlines() if row.endswith(line)) == 1, (line, text[-3000:])
    backend.delete_all_jobs()
    backend.close()
