"""Admission handed to a real Kueue (`c.KubernetesBackend.admission = "kueue"`) on the test control plane.

The kube-apiserver, kube-scheduler and kwok GPU nodes of `testing.kwok`, and the kueue manager built from Go
modules (`scripts/kueue.sh`), run as local processes. Skips where either is not built.
"""

from __future__ import annotations

import asyncio

import pytest

from jupyter_gpusched.backends.kubernetes import KubernetesBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kueue import API, make_queues, workloads
from jupyter_gpusched.testing.kwok import backend_config, make_service, run_until, simulate

pytestmark = pytest.mark.timeout(600)


def kueue_service(tmp_path, kueue, ns, **cfg):
    backend = KubernetesBackend(backend_config(kueue.cluster, ns, admission="kueue", **cfg), pod_customizer=simulate)
    return make_service(tmp_path, kueue.cluster, ns, backend=backend)


def submit(service, tenant, gpus, seconds, priority="normal"):
    return service.submit(
        notebook="sim.ipynb",
        owner="me",
        tenant=tenant,
        gpus=gpus,
        priority=priority,
        parameters={"sim_duration": seconds},
    )


def test_kueue_admits_within_its_quota_and_the_service_shows_its_queues_and_reasons(tmp_path, kueue):
    ns = kueue.cluster.namespace("kq-quota")
    make_queues(kueue.api, ns, {"team-a": 8})
    service = kueue_service(tmp_path, kueue, ns)
    try:
        assert service.scheduler.policy.name == "external"
        # The tenants are Kueue's LocalQueues, on their ClusterQueue's GPU quota (no cohort: no borrowing).
        assert service.queues()["team-a"]["quota"] == 8
        jobs = [submit(service, "team-a", 8, 4), submit(service, "team-a", 8, 4), submit(service, "team-a", 4, 4)]
        peak = 0
        reasons: set[str] = set()
        positions: set[int] = set()

        def done() -> bool:
            nonlocal peak
            peak = max(peak, sum(j.gpus for j in service.scheduler.active.values()))
            for job in jobs:
                if job.state is JobState.QUEUED:
                    reasons.add(job.reason)
                    pos = service.position(job)
                    if pos is not None:
                        positions.add(pos)
            return all(j.state.terminal for j in jobs)

        run_until(service, done, 180, kueue.cluster, "every job through Kueue")
        assert [j.state for j in jobs] == [JobState.SUCCEEDED] * 3, [j.reason for j in jobs]
        assert peak <= 8, f"Kueue's quota is 8 GPUs, the books showed {peak} in use"
        # A job that waited was told why, in Kueue's words, and where it stood in Kueue's line.
        assert any(r.startswith("Kueue: ") and "quota" in r for r in reasons), reasons
        assert 0 in positions, positions  # (0 = next, as the API counts)
        events = [e for j in jobs for e in service.events(j.id)]
        assert any(e.dst is JobState.ADMITTED and "admitted by kueue on" in e.reason for e in events), events
        assert all(asyncio.run(service.estimated_start(j)) is None for j in jobs)
    finally:
        service.backend.close()


def test_a_job_cancelled_while_it_waits_in_kueue_is_withdrawn(tmp_path, kueue):
    ns = kueue.cluster.namespace("kq-cancel")
    make_queues(kueue.api, ns, {"team-c": 8}, prefix="c-")
    service = kueue_service(tmp_path, kueue, ns)
    try:
        running = submit(service, "team-c", 8, 60)
        run_until(service, lambda: running.state is JobState.RUNNING, 120)
        waiting = submit(service, "team-c", 8, 60)
        run_until(service, lambda: len(workloads(kueue.api, ns)) == 2, 60)
        assert waiting.state is JobState.QUEUED
        service.cancel(waiting.id, "me")
        service.cancel(running.id, "me")
        run_until(service, lambda: not kueue.cluster.jobs(ns) and not workloads(kueue.api, ns), 60, what="Jobs gone")
        assert waiting.state is JobState.CANCELLED and running.state is JobState.CANCELLED
    finally:
        service.backend.close()


def test_a_job_kueue_preempts_is_requeued_once_and_runs_again(tmp_path, kueue):
    ns = kueue.cluster.namespace("kq-reclaim")
    names = make_queues(kueue.api, ns, {"team-x": 8, "team-y": 8}, cohort="kq", prefix="r-")
    for cq in names.values():  # the owner takes back what another borrowed
        kueue.api.request(
            "PATCH",
            f"{API}/clusterqueues/{cq}",
            body={"spec": {"preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}}},
            content_type="application/merge-patch+json",
        )
    service = kueue_service(tmp_path, kueue, ns)
    try:
        run_until(service, lambda: service.queues()["team-y"]["quota"] == 8, 30)
        first, second = submit(service, "team-y", 8, 300), submit(service, "team-y", 8, 300)
        run_until(service, lambda: first.state is JobState.RUNNING and second.state is JobState.RUNNING, 120)
        # One of the two runs on team-x's idle quota, and the books say so.
        assert sorted([first.borrowed, second.borrowed]) == [False, True]
        owner = submit(service, "team-x", 8, 4)
        run_until(service, lambda: first.preemptions + second.preemptions == 1 and owner.state is JobState.RUNNING, 120)
        preempted_job = first if first.preemptions else second
        kept = second if preempted_job is first else first
        assert kept.state is JobState.RUNNING and kept.preemptions == 0
        preempted = [e for e in service.events(preempted_job.id) if e.dst is JobState.PREEMPTED]
        assert len(preempted) == 1 and "Kueue" in preempted[0].reason, preempted
        # The same Job waits in Kueue and runs again once team-x is done with its quota.
        run_until(service, lambda: owner.state.terminal and preempted_job.state is JobState.RUNNING, 180)
        assert owner.state is JobState.SUCCEEDED and preempted_job.preemptions == 1 and preempted_job.attempts == 2
        for job in (first, second):
            service.cancel(job.id, "me")
        # Deleted, both (the finished owner's Job stays for its TTL).
        run_until(service, lambda: len(kueue.cluster.jobs(ns)) == 1, 60, what="the cancelled Jobs deleted")
    finally:
        service.backend.close()


def test_a_restart_keeps_the_job_kueue_runs_and_the_one_it_queues_without_duplicates(tmp_path, kueue):
    ns = kueue.cluster.namespace("kq-restart")
    make_queues(kueue.api, ns, {"team-r": 8}, prefix="rs-")
    service = kueue_service(tmp_path, kueue, ns)
    running = submit(service, "team-r", 8, 20)
    run_until(service, lambda: running.state is JobState.RUNNING, 120)
    waiting = submit(service, "team-r", 8, 4)
    run_until(service, lambda: len(workloads(kueue.api, ns)) == 2, 60)
    service.backend.close()  # the service goes away; Kueue and the Jobs stay
    service.store.close()

    service2 = kueue_service(tmp_path, kueue, ns)  # the same store and job folders
    try:
        assert service2.get(running.id).state is JobState.RUNNING  # adopted, on its GPUs
        assert service2.backend._state.tracked[running.id].kueue  # Kueue's to preempt, as before the restart
        assert service2.get(waiting.id).state is JobState.QUEUED
        both = [service2.get(running.id), service2.get(waiting.id)]
        run_until(service2, lambda: all(j.state.terminal for j in both), 180, kueue.cluster, "both done")
        assert [j.state for j in both] == [JobState.SUCCEEDED] * 2, [j.reason for j in both]
        assert [j.attempts for j in both] == [1, 1]  # neither ran twice
        assert len(kueue.cluster.jobs(ns)) == 2 and len(workloads(kueue.api, ns)) == 2  # and no Job twice
    finally:
        service2.backend.close()


def test_the_charts_rbac_in_kueue_mode_suffices_and_grants_kueue_read_only(tmp_path, kueue):
    from test_k8s_chart import api_path, render, service_account_kubeconfig  # skips without helm

    from jupyter_gpusched.backends.kubernetes import Api, KubeApiError, KubernetesConfig

    cluster = kueue.cluster
    ns = cluster.namespace("kq-chart")
    cluster.namespace("kq-home")
    make_queues(kueue.api, ns, {"team-h": 8}, prefix="h-")
    sets = ("jobNamespaces={kq-chart}", "kubernetesBackend.admission=kueue")
    for obj in render(*sets, namespace="kq-home", release="kq"):
        if obj["kind"] in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"):
            cluster.api.request("POST", api_path(obj), body=obj)
    kubeconfig = service_account_kubeconfig(cluster, "kq-home", "kq-jupyter-gpusched", tmp_path / "sa.kubeconfig")
    service = kueue_service(tmp_path, kueue, ns, kubeconfig=str(kubeconfig))
    try:
        assert service.queues()["team-h"]["quota"] == 8  # ClusterQueues and LocalQueues read as the ServiceAccount
        job = submit(service, "team-h", 4, 1)
        run_until(service, lambda: job.state.terminal, 120, cluster, "the job through Kueue")
        assert job.state is JobState.SUCCEEDED
        assert service.backend._conn.stats["api_errors"] == 0  # not one request refused
    finally:
        service.backend.close()
    sa = Api(KubernetesConfig(kubeconfig=str(kubeconfig)))
    try:
        for method, path in (
            ("DELETE", f"{API}/clusterqueues/h-team-h"),
            ("GET", f"{API}/namespaces/default/workloads"),
        ):
            with pytest.raises(KubeApiError) as exc:
                sa.request(method, path)
            assert exc.value.status == 403, (method, path)
    finally:
        sa.close()
