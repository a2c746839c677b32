"""The Helm chart deploy/helm/jupyter-gpusched: it renders, the test control plane's API server accepts every
object it renders (server-side dry run), and its RBAC is enough for the Kubernetes backend and no more.

Needs helm (`bash scripts/helm.sh build`, cached outside the repo; scripts/test.sh builds it, and without it
these tests skip saying how) and, for the cluster tests, the test control plane (`bash scripts/k8s-testenv.sh build`).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from jupyter_gpusched.backends.kubernetes import KubeApiError, KubernetesBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kwok import KwokCluster as TestCluster
from jupyter_gpusched.testing.kwok import (
    backend_config,
    make_service,
    run_until,
    running_cluster,
    simulate,
)
from jupyter_gpusched.testing.kwok import control_plane_built as _built

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "jupyter-gpusched"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def helm_binary() -> str:
    r = subprocess.run(["bash", str(ROOT / "scripts" / "helm.sh"), "path"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("helm is not built; run `bash scripts/helm.sh build` (builds helm from Go modules into the cache)")
    return r.stdout.strip()


def render(*sets: str, namespace: str = "jhub", release: str = "gs") -> list[dict]:
    args = [helm_binary(), "template", release, str(CHART), "--namespace", namespace]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def test_renders_with_default_values():
    objs = render()
    assert sorted(o["kind"] for o in objs) == sorted(
        [
            "ClusterRole",
            "ClusterRoleBinding",
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Role",
            "RoleBinding",
            "Service",
            "ServiceAccount",
        ]
    )
    (dep,) = by_kind(objs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"][:3] == ["jupyter", "gpusched", "hub-service"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/services/gpusched/gpusched/api/health"
    assert c["readinessProbe"]["httpGet"]["path"] == "/services/gpusched/gpusched/api/health"
    env = {e["name"]: e for e in c["env"]}
    assert env["JUPYTERHUB_API_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "hub",
        "key": "hub.services.gpusched.apiToken",
    }
    assert "GPUSCHED_DB_URL" not in env  # no database Secret: SQLite in the data volume
    assert pod["serviceAccountName"] == "gs-jupyter-gpusched"
    (role,) = by_kind(objs, "Role")
    assert role["metadata"]["namespace"] == "jhub"  # the release namespace runs the Jobs
    (cr,) = by_kind(objs, "ClusterRole")
    assert cr["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
    config = by_kind(objs, "ConfigMap")[0]["data"]["gpusched_config.py"]
    assert 'c.KubernetesBackend.upload_url = "http://gs-jupyter-gpusched.jhub.svc:10101/services/gpusched/"' in config


def test_renders_with_custom_values_and_the_config_is_valid_python():
    objs = render(
        "mode=standalone",
        "standalone.token.existingSecret=server-token",
        "database.existingSecret=pg",
        "jobNamespaces={team-a,team-b}",
        "kubernetesBackend.pool_label=cloud.example/pool",
        "kubernetesBackend.copy_logs=false",
        "gpusched.tick_interval=2",
        "podDisruptionBudget.enabled=false",
        "persistence.existingClaim=gpusched-data",
    )
    assert not by_kind(objs, "PodDisruptionBudget")
    assert sorted(r["metadata"]["namespace"] for r in by_kind(objs, "Role")) == ["team-a", "team-b"]
    assert sorted(r["metadata"]["namespace"] for r in by_kind(objs, "RoleBinding")) == ["team-a", "team-b"]
    (dep,) = by_kind(objs, "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["command"][:2] == ["jupyter", "server"]
    env = {e["name"]: e for e in c["env"]}
    assert env["GPUSCHED_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "pg", "key": "url"}
    assert env["JUPYTER_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "server-token"
    assert c["livenessProbe"]["httpGet"]["path"] == "/gpusched/api/health"
    # The rendered config file, run as Jupyter runs it, sets what the values say.
    from traitlets.config import Config

    source = by_kind(objs, "ConfigMap")[0]["data"]["gpusched_config.py"]
    c_ = Config()
    exec(compile(source, "gpusched_config.py", "exec"), {"c": c_, "__name__": "config"})
    assert c_.KubernetesBackend.namespace == "team-a" and c_.KubernetesBackend.in_cluster is True
    assert c_.KubernetesBackend.pool_label == "cloud.example/pool" and c_.KubernetesBackend.copy_logs is False
    assert c_.GPUSched.tick_interval == 2 and c_.GPUSched.backend == "kubernetes"


def test_admission_by_kueue_adds_read_access_to_kueue_s_queues_and_nothing_else():
    objs = render("kubernetesBackend.admission=kueue")
    kueue = {"apiGroups": ["kueue.x-k8s.io"], "verbs": ["get", "list", "watch"]}
    (role,) = by_kind(objs, "Role")
    assert [r for r in role["rules"] if r["apiGroups"] == ["kueue.x-k8s.io"]] == [
        dict(kueue, resources=["workloads", "localqueues"])
    ]
    (cr,) = by_kind(objs, "ClusterRole")
    assert cr["rules"][1:] == [dict(kueue, resources=["clusterqueues"])]
    assert not any("kueue" in str(r) for r in by_kind(render(), "Role")[0]["rules"])


def test_a_mode_without_its_token_secret_is_refused_at_render():
    helm = helm_binary()
    r = subprocess.run([helm, "template", "gs", str(CHART), "--set", "mode=standalone"], capture_output=True, text=True)
    assert r.returncode != 0 and "standalone.token.existingSecret" in r.stderr


# --- on the test control plane ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    helm_binary()
    if not _built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    with running_cluster(tmp_path_factory.mktemp("k8s") / "cluster") as c:
        yield c


def api_path(obj: dict) -> str:
    """The collection path of an object's kind (the few kinds the chart renders)."""
    group_version = obj["apiVersion"]
    plural = {"PodDisruptionBudget": "poddisruptionbudgets"}.get(obj["kind"], obj["kind"].lower() + "s")
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    ns = obj["metadata"].get("namespace")
    return f"{base}/namespaces/{ns}/{plural}" if ns else f"{base}/{plural}"


def test_every_rendered_object_is_accepted_by_the_api_server(cluster):
    for values in ((), ("mode=standalone", "standalone.token.existingSecret=t", "jobNamespaces={chart-a,chart-b}")):
        for ns in ("jhub", "chart-a", "chart-b"):
            cluster.namespace(ns)
        for obj in render(*values):
            # A dry run goes through the API server's validation and admission, and writes nothing.
            answer = cluster.api.request("POST", api_path(obj), body=obj, query={"dryRun": "All"})
            assert answer["kind"] == obj["kind"] and answer["metadata"]["name"] == obj["metadata"]["name"]


def service_account_kubeconfig(cluster: TestCluster, ns: str, name: str, path: Path) -> Path:
    """A kubeconfig with a token minted for the ServiceAccount (TokenRequest), as its pod would have."""
    token = cluster.api.request(
        "POST",
        f"/api/v1/namespaces/{ns}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": server}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": ns}}],
                "current-context": "sa",
            }
        )
    )
    return path


def test_the_charts_rbac_suffices_for_the_backend_and_is_not_cluster_admin(cluster, tmp_path):
    ns = cluster.namespace("chart-jobs")
    cluster.namespace("chart-home")
    rbac_kinds = ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    for obj in render("jobNamespaces={chart-jobs}", namespace="chart-home", release="rbac"):
        if obj["kind"] in rbac_kinds:
            cluster.api.request("POST", api_path(obj), body=obj)
    kubeconfig = service_account_kubeconfig(cluster, "chart-home", "rbac-jupyter-gpusched", tmp_path / "sa.kubeconfig")

    # The backend, as the ServiceAccount: single-node and gang jobs (Service), upload tokens (Secret), log copy.
    cfg = backend_config(
        cluster, ns, kubeconfig=str(kubeconfig), upload_url="http://127.0.0.1:9/", log_interval=0.5, max_backoff=0.5
    )
    service = make_service(tmp_path, cluster, ns, backend=KubernetesBackend(cfg, pod_customizer=simulate))
    try:
        assert service.scheduler.cluster.total_gpus == 24  # Nodes read through the ClusterRole
        done = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 1})
        gang = service.submit(notebook="sim.ipynb", owner="u", gpus=16, parameters={"sim_duration": 120})
        run_until(service, lambda: done.state is JobState.SUCCEEDED, 90, cluster, "the 1-GPU job to succeed")
        run_until(service, lambda: gang.state is JobState.RUNNING, 90, cluster, "the gang to run")
        assert "simulated" in service.log_file(done.id).read_text()  # pods/log
        admin_get = cluster.api.request
        assert len(admin_get("GET", f"/api/v1/namespaces/{ns}/services")["items"]) == 1  # the gang's rendezvous
        assert len(admin_get("GET", f"/api/v1/namespaces/{ns}/secrets")["items"]) == 2  # one upload token a job
        service.cancel(gang.id, "u")  # kill: the Job goes, with its pods, Service and Secret
        run_until(service, lambda: gang.state is JobState.CANCELLED, 30, cluster, "the gang cancelled")
        run_until(service, lambda: len(cluster.jobs(ns)) == 1, 30, cluster, "the gang's Job deleted")
        assert service.backend._conn.stats["api_errors"] == 0  # not one request refused
    finally:
        service.backend.delete_all_jobs()
        service.backend.close()

    # ... and no more: the same token is refused anything the chart did not grant.
    from jupyter_gpusched.backends.kubernetes import Api, KubernetesConfig

    sa = Api(KubernetesConfig(kubeconfig=str(kubeconfig)))
    try:
        denied = [
            ("GET", f"/api/v1/namespaces/{ns}/secrets", None),  # upload tokens are written, never read back
            ("GET", "/api/v1/namespaces/default/pods", None),  # not a job namespace
            ("DELETE", "/api/v1/nodes/od-1", None),  # nodes: read only
            ("POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles", {"metadata": {"name": "x"}, "rules": []}),
        ]
        for method, path, body in denied:
            with pytest.raises(KubeApiError) as exc:
                sa.request(method, path, body=body)
            assert exc.value.status == 403, (method, path)
        assert sa.request("GET", "/api/v1/nodes/od-1")["metadata"]["name"] == "od-1"
    finally:
        sa.close()
