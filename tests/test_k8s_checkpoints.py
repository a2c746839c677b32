"""Checkpoints on Kubernetes (issue 15): the pod's entry passes the pod's SIGTERM on to the kernel, so the
checkpoint helper saves within terminationGracePeriodSeconds (real papermill, real kernel, real signal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from traitlets import TraitError

from jupyter_gpusched import checkpoint
from jupyter_gpusched.backends.kubernetes import KubernetesBackend
from jupyter_gpusched.backends.kubernetes.config import KubernetesConfig
from jupyter_gpusched.backends.kubernetes.manifests import ENTRY, ENTRY_SCRIPT, build_manifests
from jupyter_gpusched.backends.kubernetes.upload import add_upload
from jupyter_gpusched.core import JobSpec, JobState
from jupyter_gpusched.testing.kwok import control_plane_built, make_service, pod_prints, run_until, running_cluster
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.training import make_training_notebook, read_trace

pytestmark = pytest.mark.timeout(240)

ENTRY_PY = Path(__file__).parent.parent / "jupyter_gpusched" / "backends" / "kubernetes" / "pod_entry.py"
PAPERMILL = str(Path(sys.executable).parent / "papermill")


def start_pod_process(tmp_path: Path, *, entry: bool) -> tuple[subprocess.Popen, Path, Path]:
    """The pod's command as the Job runs it (with or without the entry), on the training notebook that saves
    only on preemption (`on_preempt`), in a session of its own as a container's processes are."""
    nb = make_training_notebook(tmp_path / "in.ipynb")
    trace, folder = tmp_path / "trace.txt", tmp_path / "checkpoints"
    params = tmp_path / "parameters.json"
    params.write_text(json.dumps({"steps": 100000, "step_s": 0.05, "save_every": 3600, "trace_file": str(trace)}))
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).parent.parent),
        checkpoint.DIR_ENV: str(folder),
        checkpoint.ATTEMPT_ENV: "1",
        checkpoint.REPORT_ENV: "log",
    }
    env.pop(checkpoint.SIGNAL_ENV, None)
    command = [PAPERMILL, str(nb), str(tmp_path / "out.ipynb"), "-f", str(params), "--log-output", "-k", "python3"]
    if entry:
        command = [sys.executable, str(ENTRY_PY), *command]
    proc = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    return proc, trace, folder


def wait_for_steps(proc: subprocess.Popen, trace: Path, steps: int = 5) -> None:
    deadline = time.monotonic() + 120
    while sum(e == "step" for e, _, _ in read_trace(trace)) < steps:
        assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, "the notebook never got going"
        time.sleep(0.2)


def test_the_pods_sigterm_reaches_the_kernel_which_saves_a_checkpoint(tmp_path, monkeypatch):
    proc, trace, folder = start_pod_process(tmp_path, entry=True)
    try:
        wait_for_steps(proc, trace)
        proc.send_signal(signal.SIGTERM)  # what the kubelet does to the first process of a deleted pod
        out = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    events = read_trace(trace)
    preempted = [s for e, _, s in events if e == "preempted"]
    assert preempted, out
    last_step = max(s for e, _, s in events if e == "step")
    manifest = json.loads((folder / checkpoint.MANIFEST).read_text())
    assert manifest["attempt"] == 1
    monkeypatch.setenv(checkpoint.DIR_ENV, str(folder))
    # nothing lost: the step it was at when the signal came
    assert checkpoint.load() == {"step": preempted[-1]} and preempted[-1] >= last_step
    # The entry sent the signal to the kernel's group (not to papermill), and the pod ended once papermill saw
    # the kernel end: the rest of the grace period is not waited out. (The helper's own `gpusched-checkpoint`
    # line may go down with the kernel before papermill logs it; the saved file is what the next attempt needs.)
    assert "gpusched: stopping: signal 15 to groups [" in out, out
    assert proc.returncode != 0


def test_without_the_entry_the_kernel_never_hears_of_the_sigterm(tmp_path):
    """What the entry fixes: papermill alone goes away at SIGTERM, and its kernel (a session of its own)
    does not save."""
    proc, trace, folder = start_pod_process(tmp_path, entry=False)
    try:
        wait_for_steps(proc, trace)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
        time.sleep(3)  # the orphaned kernel notices its parent is gone within a second or so, and exits
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not any(e == "preempted" for e, _, _ in read_trace(trace))
    assert not (folder / checkpoint.MANIFEST).exists()


def test_the_entry_is_the_first_process_also_under_the_uploader():
    cfg = KubernetesConfig(upload_url="http://svc:8888/")
    job, cm = build_manifests("0a1b2c3d4e5f", JobSpec(notebook="a.ipynb", gpus=1), "{}", {}, cfg)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert tuple(container["command"][:2]) == ENTRY and container["command"][2] == "papermill"
    assert cm["data"][ENTRY_SCRIPT] == ENTRY_PY.read_text()
    add_upload(job, cm, "0a1b2c3d4e5f", "token", cfg)
    assert tuple(container["command"][:2]) == ENTRY  # SIGTERM goes to the entry, not to the uploader
    assert container["command"][2:5] == ["python", "/gpusched/input/gpusched_upload.py", "papermill"]


# --- checkpoint reports read from the pod log, on the test control plane --------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not control_plane_built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    with running_cluster(tmp_path_factory.mktemp("k8s") / "cluster") as c:
        yield c


def test_checkpoint_lines_in_the_pod_log_reach_the_job(cluster, tmp_path):
    ns = cluster.namespace("checkpoints")
    service = make_service(tmp_path, cluster, ns, log_interval=0.3, heartbeat_interval=0.3)
    try:
        job = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 30})
        run_until(service, lambda: job.state is JobState.RUNNING, timeout=30, what="running")
        assert service.scheduler.jobs[job.id].last_checkpoint_at is None
        saved = round(time.time() - 5, 3)
        # what checkpoint.save prints in a pod (GPUSCHED_CHECKPOINT_REPORT=log), among other lines; a line that
        # only looks like one, and one from the future, do not count beyond now
        pod_prints(
            cluster,
            "epoch 3",
            checkpoint.LOG_PREFIX + json.dumps({"time": saved - 60, "file": "a", "kind": "pickle", "attempt": 1}),
            checkpoint.LOG_PREFIX + json.dumps({"time": saved, "file": "b", "kind": "pickle", "attempt": 1}),
            checkpoint.LOG_PREFIX + "{not json",
        )
        run_until(
            service,
            lambda: service.scheduler.jobs[job.id].last_checkpoint_at == saved,
            timeout=20,
            what="the checkpoint reported",
        )
        service.tick()
        stored = {j.id: j for j, _ in service.store.load_jobs()}[job.id]
        assert stored.last_checkpoint_at == saved
        future = time.time() + 3600
        pod_prints(cluster, checkpoint.LOG_PREFIX + json.dumps({"time": future}))
        run_until(
            service,
            lambda: (service.scheduler.jobs[job.id].last_checkpoint_at or 0) > saved,
            timeout=20,
            what="the second report",
        )
        assert service.scheduler.jobs[job.id].last_checkpoint_at < future  # never later than when it was read
    finally:
        service.backend.delete_all_jobs()
        service.backend.close()


def test_preempt_grace_is_a_setting_of_the_backend_and_the_pods_grace_period(tmp_path):
    nb = make_notebook(tmp_path / "nb.ipynb", "print(1)")
    cfg = tmp_path / "jupyter_server_config.py"
    cfg.write_text("c.KubernetesBackend.preempt_grace = 12.5\n")
    out = subprocess.run(
        [sys.executable, "-m", "jupyter_gpusched.cli", "manifest", str(nb), "--config", str(cfg), "--no-configmap"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (job,) = [d for d in yaml.safe_load_all(out) if d]
    assert job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 13  # rounded up
    with pytest.raises(TraitError):
        KubernetesBackend(preempt_grace=-1, start=False)


def test_the_policys_checkpoint_interval_reaches_the_pod():
    cfg, spec = KubernetesConfig(), JobSpec(notebook="a.ipynb", gpus=1)
    job, _ = build_manifests("0a1b2c3d4e5f", spec, "{}", {}, cfg, checkpoint_interval=120)
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[checkpoint.INTERVAL_ENV] == "120.0"  # what checkpoint.every() follows
    job, _ = build_manifests("0a1b2c3d4e5f", spec, "{}", {}, cfg)
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert checkpoint.INTERVAL_ENV not in env
