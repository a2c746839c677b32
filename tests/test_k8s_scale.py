"""The pod-log copy on a pool of workers (issue 16, scale check), on the real test control plane with kwok nodes
(skipped, with the build command, when its binaries are not built), as in test_k8s_cluster.py.

Many pods running at once: each job's log.txt gets its own pod's lines, every line exactly once, with fetches
running side by side; and the backend's requests carry its own User-Agent."""

from __future__ import annotations

import pytest

from jupyter_gpusched.backends.kubernetes import USER_AGENT, KubernetesBackend
from jupyter_gpusched.backends.kubernetes.api import Api
from jupyter_gpusched.backends.kubernetes.config import KubernetesConfig
from jupyter_gpusched.backends.kubernetes.names import job_name
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kwok import (
    GPUS_PER_NODE,
    NODES,
    make_service,
    pod_prints,
    run_until,
    running_cluster,
)
from jupyter_gpusched.testing.kwok import control_plane_built as _built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not _built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    with running_cluster(tmp_path_factory.mktemp("k8s") / "cluster") as c:
        yield c


def test_the_log_workers_trait_reaches_the_settings_and_starts_that_many_threads():
    backend = KubernetesBackend(start=False, log_workers=3)
    assert backend.cfg.log_workers == 3
    assert [t.name for t in backend._podlogs.threads] == [
        "gpusched-k8s-logs",
        "gpusched-k8s-logs-1",
        "gpusched-k8s-logs-2",
        "gpusched-k8s-logs-3",
    ]
    assert KubernetesBackend(start=False).cfg.log_workers == 4  # the default


def test_the_api_client_sends_the_backends_user_agent(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n"
    )
    api = Api(KubernetesConfig(kubeconfig=str(kubeconfig)))
    assert api.client.user_agent == USER_AGENT
    assert USER_AGENT.startswith("jupyter-gpusched/")
    assert Api(KubernetesConfig(kubeconfig=str(kubeconfig)), user_agent="other").client.user_agent == "other"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_many_pods_logs_are_copied_side_by_side_each_line_once_into_its_own_job(cluster, tmp_path):
    ns = cluster.namespace("scale-logs")
    n = GPUS_PER_NODE * len(NODES)  # every GPU of the cluster: one pod each, all running at once
    service = make_service(tmp_path, cluster, ns, log_interval=0.5, log_workers=4)
    assert len(service.backend._podlogs.workers) == 4
    jobs = [
        service.submit(notebook="sim.ipynb", owner="u", gpus=1, preemptible=True, parameters={"sim_duration": 60})
        for _ in range(n)
    ]
    run_until(
        service, lambda: all(j.state is JobState.RUNNING for j in jobs), timeout=90, cluster=cluster, what="running"
    )
    assert sum(t.is_alive() for t in service.backend._podlogs.threads) == 5  # the dispatcher and 4 workers
    for i in range(3):
        pod_prints(cluster, f"scale-line-{i}")
        run_until(
            service,
            lambda i=i: all(f"scale-line-{i}" in service.log_file(j.id).read_text() for j in jobs),
            timeout=60,
            what=f"line {i} in every job's log",
        )
    for j in jobs:
        text = service.log_file(j.id).read_text()
        rows = text.splitlines()
        for line in ("simulated", "scale-line-0", "scale-line-1", "scale-line-2"):
            assert sum(1 for row in rows if row.endswith(line)) == 1, (j.id, line, text[-2000:])
        # the job's own pod, and no other's
        headers = [row for row in rows if "log of pod" in row]
        assert len(headers) == 1 and f"log of pod {job_name(j.id)}-" in headers[0], headers
    stats = service.backend.log_stats
    # Each line was printed only once the one before was in every log, so every pod was fetched at least once
    # per line (a pod's first fetch may already bring line 0: on a loaded machine 4 per pod is not guaranteed).
    assert stats["fetches"] >= 3 * n
    assert stats["in_flight"] <= 4 and stats["max_in_flight"] <= 4
    service.backend.delete_all_jobs()
    service.backend.close()
    service.store.close()


def test_with_one_log_worker_the_copy_still_reaches_every_pod(cluster, tmp_path):
    ns = cluster.namespace("scale-logs-1")
    service = make_service(tmp_path, cluster, ns, log_interval=0.5, log_workers=1)
    jobs = [
        service.submit(notebook="sim.ipynb", owner="u", gpus=1, preemptible=True, parameters={"sim_duration": 30})
        for _ in range(6)
    ]
    run_until(service, lambda: all(j.state is JobState.RUNNING for j in jobs), timeout=60, what="running")
    pod_prints(cluster, "one-worker-line")
    run_until(
        service,
        lambda: all("one-worker-line" in service.log_file(j.id).read_text() for j in jobs),
        timeout=60,
        what="the line in every job's log",
    )
    assert service.backend.log_stats["max_in_flight"] == 1
    service.backend.delete_all_jobs()
    service.backend.close()
    service.store.close()
