"""The kubernetes backend's pure parts: names, labels, manifests, the admission patch, `manifest` CLI.
(Its behaviour against a real control plane is in test_k8s_cluster.py.)"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from jupyter_gpusched.backends.kubernetes import (
    A_JOB_ID,
    KubernetesConfig,
    build_manifests,
    job_name,
    label_value,
    placement_patch,
)
from jupyter_gpusched.core import JobSpec, Priority
from jupyter_gpusched.testing.kwok import fake_gpu_node
from jupyter_gpusched.testing.notebooks import make_notebook

RFC1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

ODD_IDS = ["abc123", "ABC", "a_b", "-x-", "日本語", "job/../../etc", "", "x" * 300, "a.b", "A-1", "a--b", "0" * 55]


@pytest.mark.parametrize("job_id", ODD_IDS)
def test_job_names_are_rfc1123_labels(job_id):
    name = job_name(job_id)
    assert RFC1123.match(name) and len(name) <= 63, name
    assert job_name(job_id) == name  # deterministic


def test_job_names_do_not_collide():
    ids = ODD_IDS + ["abc", "ABC-", "abc-", "Abc", "a b", "a-b"]
    names = [job_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert job_name("0a1b2c3d4e5f") == "gpusched-0a1b2c3d4e5f"  # the service's own ids stay readable


@pytest.mark.parametrize("text", ["default", "Team A", "ü" * 70, "-lead", "x" * 63, "x" * 64, "a.b_c-d", ""])
def test_label_values_are_valid(text):
    value = label_value(text)
    assert LABEL.match(value) and len(value) <= 63, value


def test_manifests_carry_spec_labels_limits_and_retries(tmp_path):
    cfg = KubernetesConfig(namespace="ml", tenant_namespaces={"vision": "team-vision"}, image="img:1")
    spec = JobSpec(
        notebook="experiments/Train ResNet (final).ipynb",
        gpus=4,
        priority=Priority.HIGH,
        tenant="vision",
        owner="ada",
        max_runtime=90.5,
        max_retries=3,
    )
    job, cm = build_manifests("0a1b2c3d4e5f", spec, '{"cells": []}', {"lr": 0.1}, cfg, kernel_name="python3")
    assert job["metadata"]["namespace"] == cm["metadata"]["namespace"] == "team-vision"
    assert job["metadata"]["name"] == cm["metadata"]["name"] == "gpusched-0a1b2c3d4e5f"
    labels = job["metadata"]["labels"]
    assert labels["gpusched.io/job-id"] == "0a1b2c3d4e5f"
    assert labels["gpusched.io/tenant"] == "vision" and labels["gpusched.io/priority"] == "high"
    assert all(LABEL.match(v) for v in labels.values())
    assert job["metadata"]["annotations"]["gpusched.io/notebook"] == spec.notebook
    js = job["spec"]
    # backoffLimit 0: the service, not the Job controller, re-runs a lost job (max_retries); a failing notebook fails at once
    assert js["suspend"] is True and js["backoffLimit"] == 0 and js["activeDeadlineSeconds"] == 91
    assert "managedBy" not in js  # any value would make the built-in Job controller ignore it
    pod = js["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    c = pod["containers"][0]
    assert c["image"] == "img:1"
    assert c["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    # the entry first: it passes the pod's SIGTERM on to the kernel (checkpoints)
    assert c["command"][:4] == [
        "python",
        "/gpusched/input/gpusched_entry.py",
        "papermill",
        "/gpusched/input/notebook.ipynb",
    ] and c["command"][-2:] == [
        "-k",
        "python3",
    ]
    assert {"name": "input", "configMap": {"name": "gpusched-0a1b2c3d4e5f"}} in pod["volumes"]
    assert cm["data"]["parameters.json"] == '{"lr": 0.1}'
    assert js["template"]["metadata"]["labels"]["gpusched.io/job-id"] == "0a1b2c3d4e5f"
    assert js["template"]["metadata"]["annotations"][A_JOB_ID] == "0a1b2c3d4e5f"


def test_admission_patch_places_and_unsuspends():
    cfg = KubernetesConfig()
    patch = placement_patch("node-7", "spot", True, 2, cfg)
    spec = patch["spec"]
    assert spec["suspend"] is False
    tpl = spec["template"]
    assert tpl["metadata"]["annotations"]["gpusched.io/attempt"] == "2"
    assert tpl["spec"]["nodeSelector"] == {"gpusched.io/pool": "spot"}
    terms = tpl["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}]
    gpu_taint = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    assert tpl["spec"]["tolerations"] == [gpu_taint, {"key": "gpusched.io/spot", "operator": "Exists"}]
    on_demand = placement_patch("node-1", "on-demand", False, 1, cfg)["spec"]["template"]["spec"]
    assert on_demand["tolerations"] == [gpu_taint]  # merge patch: drops a spot toleration of an earlier attempt


def test_fake_node_has_gpus_and_spot_taint():
    node = fake_gpu_node("s1", "spot", 8, spot=True)
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["spec"]["taints"][0]["key"] == "gpusched.io/spot"


def test_manifest_command_prints_the_job_yaml(tmp_path):
    nb = make_notebook(tmp_path / "My Notebook (v2).ipynb", "print(1)")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_gpusched.cli",
            "manifest",
            str(nb),
            "--gpus",
            "2",
            "-p",
            "epochs=3",
            "--priority",
            "high",
            "--max-runtime",
            "600",
            "--namespace",
            "ml",
            "--image",
            "img:2",
            "--node",
            "n1",
            "--pool",
            "p",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    job, cm = docs
    assert job["kind"] == "Job" and cm["kind"] == "ConfigMap"
    assert job["metadata"]["namespace"] == "ml"
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"
    assert cm["data"]["parameters.json"] == '{"epochs": 3}'
    assert "# admission: kubectl patch job" in out


def test_manifest_command_reports_bad_input(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "manifest", str(tmp_path / "missing.ipynb")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "error:" in r.stderr and "Traceback" not in r.stderr


def test_manifest_command_reads_the_servers_k8s_settings(tmp_path):
    nb = make_notebook(tmp_path / "nb.ipynb", "print(1)")
    cfg = tmp_path / "jupyter_server_config.py"
    cfg.write_text('c.GPUSched.k8s_tenant_namespaces = {"vision": "team-vision"}\nc.GPUSched.k8s_image = "reg/img:7"\n')
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_gpusched.cli",
            "manifest",
            str(nb),
            "--config",
            str(cfg),
            "--tenant",
            "vision",
            "--no-configmap",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (job,) = [d for d in yaml.safe_load_all(out) if d]
    assert job["metadata"]["namespace"] == "team-vision"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/img:7"


def test_backend_reads_c_kubernetesbackend_from_its_parents_config():
    from traitlets.config import Config, LoggingConfigurable

    from jupyter_gpusched.backends.kubernetes import KubernetesBackend

    c = Config()
    c.KubernetesBackend.namespace = "gpu"
    c.KubernetesBackend.tenant_namespaces = {"vision": "team-vision"}
    c.KubernetesBackend.allowed_pools = ["a100"]
    c.KubernetesBackend.spot_pools = ["spot"]
    c.KubernetesBackend.ttl_after_finished = -1
    c.KubernetesBackend.output_volume = {"persistentVolumeClaim": {"claimName": "nb"}}
    app = LoggingConfigurable(config=c)  # stands in for the server app
    backend = KubernetesBackend(parent=app, start=False)  # not started: connects to nothing
    try:
        assert backend.namespace == "gpu"
        cfg = backend.cfg
        assert cfg.namespace == "gpu" and cfg.namespace_for("vision") == "team-vision"
        assert cfg.pools == ("a100",) and cfg.spot_pools == ("spot",)
        assert cfg.ttl_after_finished is None and cfg.output_volume == {"persistentVolumeClaim": {"claimName": "nb"}}
        assert cfg.image == KubernetesConfig().image  # unset: the default
    finally:
        backend.close()


def test_backend_traits_default_to_the_config_defaults_and_show_a_given_config():
    from jupyter_gpusched.backends.kubernetes import KubernetesBackend

    assert KubernetesBackend(start=False).cfg == KubernetesConfig()
    given = KubernetesConfig(namespace="ml", pools=("p",), ttl_after_finished=None, heartbeat_interval=1.0)
    backend = KubernetesBackend(given, start=False)
    assert backend.cfg is given
    assert backend.namespace == "ml" and backend.allowed_pools == ["p"] and backend.ttl_after_finished == -1


def test_the_old_gpusched_k8s_settings_fill_in_what_kubernetesbackend_leaves_unset():
    from traitlets.config import Config

    from jupyter_gpusched.backends.kubernetes import KubernetesBackend
    from jupyter_gpusched.server.app import GPUSched

    c = Config()
    c.GPUSched.k8s_namespace = "old"
    c.GPUSched.k8s_pools = ["a100"]
    c.GPUSched.k8s_image = "reg/img:1"
    c.GPUSched.pools = {"spot": {"spot": True}, "od": {"price_per_gpu_hour": 2.0}}
    c.KubernetesBackend.namespace = "new"
    app = GPUSched(config=c)
    warnings = []
    app.log.warning = lambda fmt, *args: warnings.append(fmt % args)
    cfg = KubernetesBackend(config=app.apply_backend_shortcuts(), start=False).cfg
    assert (
        cfg.namespace == "new" and cfg.image == "reg/img:1" and cfg.pools == ("a100",) and cfg.spot_pools == ("spot",)
    )
    assert sorted(warnings) == [
        "c.GPUSched.k8s_image is deprecated: use c.KubernetesBackend.image",
        "c.GPUSched.k8s_namespace is deprecated: use c.KubernetesBackend.namespace",
        "c.GPUSched.k8s_pools is deprecated: use c.KubernetesBackend.allowed_pools",
    ]


def test_manifest_command_reads_c_kubernetesbackend(tmp_path):
    nb = make_notebook(tmp_path / "nb.ipynb", "print(1)")
    cfg = tmp_path / "jupyter_server_config.py"
    cfg.write_text(
        'c.KubernetesBackend.namespace = "gpu"\nc.GPUSched.k8s_namespace = "old"\nc.GPUSched.k8s_image = "reg/img:8"\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "manifest", str(nb), "--config", str(cfg), "--no-configmap"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (job,) = [d for d in yaml.safe_load_all(out) if d]
    assert job["metadata"]["namespace"] == "gpu"  # the new name wins over the deprecated one
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/img:8"  # the deprecated one still works


# --- what the caches mean: the news of a job (pure; the cluster tests see them happen) ---------------------
def _tracked(attempt=1):
    from jupyter_gpusched.backends.kubernetes.state import Tracked

    return Tracked(
        "j1", "gpusched-j1", "ml", "run", node="n1", attempt=attempt, started_attempt=attempt, manifests=({}, {})
    )


def _job(*conditions, attempt=1, deadline=None):
    spec = {"suspend": False, "template": {"metadata": {"annotations": {"gpusched.io/attempt": str(attempt)}}}}
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "metadata": {"name": "gpusched-j1", "namespace": "ml"},
        "spec": spec,
        "status": {"conditions": [{"type": t, "status": "True", "reason": r, "message": m} for t, r, m in conditions]},
    }


def _pod(phase="Failed", exit_code=None, reason=None, disrupted=False, attempt=1):
    status = {"phase": phase, "conditions": []}
    if exit_code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]
    if reason:
        status["reason"], status["message"] = reason, "the node said no"
    if disrupted:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"})
    return {
        "metadata": {"name": "gpusched-j1-x", "annotations": {"gpusched.io/attempt": str(attempt)}},
        "spec": {"nodeName": "n1"},
        "status": status,
    }


def _verdict(kj, *pods):
    from jupyter_gpusched.backends.kubernetes.status import evaluate

    return evaluate(_tracked(), kj, {f"p{i}": p for i, p in enumerate(pods)}, pin_nodes=True, now=1.0)


def test_a_notebook_that_exits_non_zero_fails_the_job():
    failed = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    v = _verdict(_job(failed), _pod(exit_code=1))
    assert v.kind == "failed" and "BackoffLimitExceeded" in v.message and "exit code 1" in v.message


def test_a_runner_whose_kernel_did_not_start_is_a_launch_failure_not_the_notebooks():
    failed = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    v = _verdict(_job(failed), _pod(exit_code=4))
    assert v.kind == "not_started" and "kernel did not start" in v.message and v.want == "done"
    assert _verdict(_job(failed), _pod(exit_code=4, attempt=0)).kind == "failed"  # another attempt's pod


def test_a_pod_the_node_failed_without_a_container_error_loses_the_job():
    failed = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    v = _verdict(_job(failed), _pod(reason="UnexpectedAdmissionError"))
    assert v.kind == "lost" and "UnexpectedAdmissionError" in v.message  # re-run while max_retries allow
    assert _verdict(_job(failed), _pod()).kind == "failed"  # nothing says it was not the notebook


def test_max_runtime_fails_and_an_eviction_preempts():
    v = _verdict(
        _job(("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"), deadline=60),
        _pod(reason="DeadlineExceeded"),
    )
    assert v.kind == "failed" and v.message == "max_runtime exceeded (60 s)"
    v = _verdict(_job(), _pod(phase="Running", disrupted=True))
    assert v.kind == "preempted" and "evicted" in v.message and v.want == "suspend"


def test_under_kueue_a_job_names_its_tenant_s_local_queue_and_priority_class(tmp_path):
    cfg = KubernetesConfig(
        admission="kueue", kueue_queues={"vision": "vision-gpu"}, kueue_priority_classes={"high": "nb-high"}
    )
    job, _ = build_manifests("j1", JobSpec("nb.ipynb", gpus=2, tenant="vision", priority=Priority.HIGH), "{}", {}, cfg)
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "vision-gpu" and labels["kueue.x-k8s.io/priority-class"] == "nb-high"
    assert job["spec"]["suspend"] is True  # Kueue unsuspends it: no webhook has to
    job, _ = build_manifests("j2", JobSpec("nb.ipynb", tenant="nlp"), "{}", {}, cfg)
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "nlp"
    assert "kueue.x-k8s.io/priority-class" not in job["metadata"]["labels"]
    job, _ = build_manifests("j3", JobSpec("nb.ipynb"), "{}", {}, KubernetesConfig())
    assert not any(k.startswith("kueue.x-k8s.io/") for k in job["metadata"]["labels"])
