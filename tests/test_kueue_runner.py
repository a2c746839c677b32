"""A real Kueue manager on the test control plane (`jupyter_gpusched.testing.kueue`, the plugin's `kueue` fixture),
no container: CRDs from the module source (v1beta2 only), no webhooks registered, plain suspended Jobs.

The cluster test skips where the control plane or Kueue is not built (Kueue's cold build takes about 40
minutes, so CI does not build it: `bash scripts/kueue.sh build`)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from jupyter_gpusched.testing.kueue import (
    API,
    GPU,
    QUEUE_LABEL,
    condition,
    kueue_config,
    make_queues,
    plain_job,
    v1beta2_only,
    workloads,
)
from jupyter_gpusched.testing.kwok import GPUS_PER_NODE
from jupyter_gpusched.testing.waits import wait_until


def test_crds_are_applied_with_v1beta2_as_their_only_version():
    crd = {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
        "spec": {
            "versions": [
                {"name": "v1beta1", "served": True, "storage": True, "deprecated": True, "schema": {"a": 1}},
                {"name": "v1beta2", "served": True, "storage": False, "schema": {"b": 2}},
            ],
            "conversion": {"strategy": "Webhook"},
        },
    }
    out = v1beta2_only(copy.deepcopy(crd))
    assert out["spec"]["versions"] == [{"name": "v1beta2", "served": True, "storage": True, "schema": {"b": 2}}]
    assert "conversion" not in out["spec"]
    alpha = {"spec": {"versions": [{"name": "v1alpha1", "served": True, "storage": True}]}}
    assert v1beta2_only(copy.deepcopy(alpha)) == alpha  # a CRD without v1beta2 is left alone


def test_the_configuration_turns_off_what_needs_a_deployment():
    cfg = kueue_config(Path("/x"), webhook_port=1, health_port=2, metrics_port=3, qps=-1, burst=10)
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["internalCertManagement"] == {"enable": False}
    assert cfg["integrations"] == {"frameworks": ["batch/job"]}
    assert cfg["manageJobsWithoutQueueName"] is False
    assert "waitForPodsReady" not in cfg
    assert cfg["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert cfg["metrics"]["bindAddress"] == "127.0.0.1:3"
    assert cfg["webhook"] == {"host": "127.0.0.1", "port": 1, "certDir": "/x/webhook-certs"}
    assert cfg["clientConnection"] == {"qps": -1, "burst": 10}


def test_a_plain_job_is_created_suspended_with_its_queue_and_gpus():
    job = plain_job("j", "ns", "team-a", 4, duration=2)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][QUEUE_LABEL] == "team-a"
    res = job["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"][GPU] == res["limits"][GPU] == "4"
    assert job["spec"]["template"]["metadata"]["annotations"]["gpusched.io/sim-duration"] == "2.0s"


def _gpus(obj: dict) -> int:
    return sum(
        int(((c.get("resources") or {}).get("limits") or {}).get(GPU, 0))
        for c in obj["spec"]["template"]["spec"]["containers"]
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_kueue_admits_plain_suspended_jobs_within_the_quota_only(kueue):
    api = kueue.api
    ns = kueue.cluster.namespace("kueue-runner")
    assert make_queues(api, ns, {"team-a": 8}) == {"team-a": "team-a"}
    cq = api.request("GET", f"{API}/clusterqueues/team-a")
    assert cq["spec"]["resourceGroups"][0]["coveredResources"] == ["cpu", "memory", GPU]
    sizes = {"big-1": 8, "big-2": 8, "small": 4}  # 20 GPUs asked, 8 in the quota (16 free on the nodes)
    for name, gpus in sizes.items():
        api.request(
            "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", body=plain_job(name, ns, "team-a", gpus, duration=3)
        )
    seen = {"admitted": 0, "running": 0, "reserved": 0}
    queues: set[str] = set()  # the ClusterQueues that admitted Workloads

    def finished(job: dict) -> bool:
        return any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in job["status"].get("conditions") or ()
        )

    def all_done() -> bool:
        jobs = api.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        admitted = sum(_gpus(j) for j in jobs if not j["spec"].get("suspend") and not finished(j))
        pods = api.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        running = sum(
            int(((c.get("resources") or {}).get("limits") or {}).get(GPU, 0))
            for p in pods
            if p["spec"].get("nodeName") and p["status"].get("phase") not in ("Succeeded", "Failed")
            for c in p["spec"]["containers"]
        )
        holding = [w for w in workloads(api, ns) if condition(w, "QuotaReserved") and not condition(w, "Finished")]
        reserved = sum(
            int(w["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"][GPU])
            for w in holding
        )
        queues.update(w["status"]["admission"]["clusterQueue"] for w in holding)
        for key, value in (("admitted", admitted), ("running", running), ("reserved", reserved)):
            seen[key] = max(seen[key], value)
        assert admitted <= 8, f"Jobs holding {admitted} GPUs unsuspended at once (quota 8)"
        assert running <= 8, f"pods holding {running} GPUs running at once (quota 8)"
        assert reserved <= 8, f"Workloads reserving {reserved} GPUs at once (quota 8)"
        return len(jobs) == 3 and all(finished(j) for j in jobs)

    wait_until(all_done, 180, "the three Jobs to finish", 0.2)
    jobs = api.request("GET", f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    assert {j["metadata"]["name"]: j["status"].get("succeeded") for j in jobs} == {n: 1 for n in sizes}
    assert 0 < seen["running"] <= GPUS_PER_NODE
    wait_until(
        lambda: len([w for w in workloads(api, ns) if condition(w, "Finished")]) == 3,
        60,
        lambda: f"the Workloads to finish: {[w['status'].get('conditions') for w in workloads(api, ns)]}",
        0.2,
    )
    assert queues == {"team-a"}
    for w in workloads(api, ns):  # a finished Workload gives its quota back
        assert w["spec"]["queueName"] == "team-a"
        assert [c["reason"] for c in w["status"]["conditions"] if c["type"] == "QuotaReserved"] == ["Finished"]

    # Kueue held jobs back for quota (not for capacity: the two on-demand nodes have 16 GPUs free).
    def held_back() -> list[dict]:
        return [
            e
            for e in api.request("GET", f"/api/v1/namespaces/{ns}/events")["items"]
            if e.get("reason") == "Pending"
            and e["involvedObject"]["kind"] == "Workload"
            and "insufficient unused quota" in (e.get("message") or "")
        ]

    wait_until(held_back, 30, "Kueue's Pending events (insufficient quota)", 0.2)
