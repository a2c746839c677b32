"""Checkpoints in the live service (issue 15): the helper module, the checkpoint folder that survives attempts,
graceful preemption on the local backend (real processes, real signals), checkpoint times reaching the core and
the store, and victims chosen by the work actually at risk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from traitlets import TraitError

from jupyter_gpusched import checkpoint
from jupyter_gpusched.backends import LaunchRequest, LocalBackend
from jupyter_gpusched.backends.preemption import checkpoint_dir, preempt_signum
from jupyter_gpusched.core import Cluster, JobSpec, NodeSpec, Scheduler, Tenant
from jupyter_gpusched.core.model import Preempt
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.training import train_then_preempt
from jupyter_gpusched.testing.waits import run_to_end

pytestmark = pytest.mark.timeout(240)


# --- the helper ------------------------------------------------------------------------------------------------
@pytest.fixture
def ckpt_env(tmp_path, monkeypatch):
    folder = tmp_path / "ckpt"
    monkeypatch.setenv(checkpoint.DIR_ENV, str(folder))
    monkeypatch.delenv(checkpoint.INTERVAL_ENV, raising=False)
    return folder


def test_load_is_none_before_the_first_save_then_the_last_object(ckpt_env):
    assert checkpoint.load() is None
    for step in range(5):
        checkpoint.save({"step": step})
    assert checkpoint.load() == {"step": 4}
    assert len(list(ckpt_env.glob("ckpt-*"))) == checkpoint.KEEP  # the last N only
    assert not list(ckpt_env.glob(".*.tmp"))  # nothing half-written left behind
    manifest = json.loads((ckpt_env / checkpoint.MANIFEST).read_text())
    assert manifest["kind"] == "pickle" and checkpoint.last_saved() == manifest["time"]


def test_save_copies_a_file_or_folder_given_as_a_path(ckpt_env, tmp_path):
    weights = tmp_path / "weights.npy"
    weights.write_bytes(b"\x01\x02")
    copy = checkpoint.save(weights, keep=3)
    assert copy.read_bytes() == b"\x01\x02" and checkpoint.load() == copy
    run = tmp_path / "run"
    (run / "sub").mkdir(parents=True)
    (run / "sub" / "a.txt").write_text("a")
    checkpoint.save(run)
    assert (checkpoint.load() / "sub" / "a.txt").read_text() == "a"
    assert (run / "sub" / "a.txt").exists()  # copied, not moved


def test_every_follows_the_interval_the_scheduler_hands_out(ckpt_env, monkeypatch):
    monkeypatch.setenv(checkpoint.INTERVAL_ENV, "42")
    assert checkpoint.every().seconds == 42.0
    assert checkpoint.every(7).seconds == 7.0
    monkeypatch.delenv(checkpoint.INTERVAL_ENV)
    assert checkpoint.every().seconds == checkpoint.DEFAULT_INTERVAL
    due = checkpoint.every(0)
    assert due  # due at once with a zero interval
    assert not checkpoint.every(3600)  # a fresh guard is not due before its interval


def test_the_preemption_signal_saves_the_registered_state_then_ends_the_process(ckpt_env):
    code = (
        "import time; from jupyter_gpusched import checkpoint\n"
        "state = {'step': 0}\n"
        "checkpoint.on_preempt(lambda: state)\n"
        "print('ready', flush=True)\n"
        "while True:\n    state['step'] += 1; time.sleep(0.01)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == -signal.SIGTERM  # the signal still ends it, after the save
    assert checkpoint.load()["step"] > 0


def test_preempt_signal_names():
    assert preempt_signum("term") is signal.SIGTERM and preempt_signum("SIGUSR1") is signal.SIGUSR1
    assert preempt_signum("10") is signal.Signals(10)
    with pytest.raises(ValueError):
        preempt_signum("SIGNOPE")
    with pytest.raises((ValueError, TraitError)):
        LocalBackend(preempt_signal="nope")
    with pytest.raises((ValueError, TraitError)):
        LocalBackend(preempt_grace=-1)


# --- the local backend: the folder, the variables --------------------------------------------------------------
def test_every_job_gets_its_checkpoint_folder_attempt_and_interval(tmp_path):
    nb = make_notebook(
        tmp_path / "env.ipynb",
        "import json, os\n"
        "keys = ['GPUSCHED_CHECKPOINT_DIR', 'GPUSCHED_ATTEMPT', 'GPUSCHED_CHECKPOINT_INTERVAL', 'GPUSCHED_PREEMPT_SIGNAL']\n"
        "json.dump({k: os.environ.get(k) for k in keys}, open('env.json', 'w'))",
    )
    backend = LocalBackend(virtual_gpus=1, heartbeat_interval=0.5, preempt_signal="SIGUSR1")
    job_dir = tmp_path / "jobs" / "j1"
    req = LaunchRequest("j1", nb, tmp_path, {}, (0,), job_dir, None, attempt=2, checkpoint_interval=90.0)
    try:
        backend.launch(req)
        assert run_to_end(backend, {"j1"})["j1"][-1].kind == "succeeded"
    finally:
        backend.close()
    env = json.loads((tmp_path / "env.json").read_text())
    assert env == {
        "GPUSCHED_CHECKPOINT_DIR": str(checkpoint_dir(job_dir)),
        "GPUSCHED_ATTEMPT": "2",
        "GPUSCHED_CHECKPOINT_INTERVAL": "90.0",
        "GPUSCHED_PREEMPT_SIGNAL": "SIGUSR1",
    }


# --- the live service: preemption, resume, the time in the core and the store ---------------------------------
def test_a_preempted_notebook_saves_in_the_grace_period_and_resumes_at_that_step(tmp_path):
    # The last save takes 4 s: a plain kill (SIGTERM, 1.5-3 s, SIGKILL) would cut it short.
    trace, seen = train_then_preempt(tmp_path, grace=20.0, steps=300, step_s=0.05, save_every=1.0, save_s=4.0)
    assert seen["attempts"] == 2 and seen["preemptions"] == 1, seen
    preempted = [s for e, a, s in trace if e == "preempted" and a == 1]
    resumed = [s for e, a, s in trace if e == "start" and a == 2]
    assert preempted and resumed == preempted[-1:], trace  # attempt 2 starts where the signal found attempt 1
    assert ("done", 2, 300) in trace
    assert seen["core"] is not None and seen["store"] == seen["core"]  # the live checkpoint time, recorded
    assert len(list(seen["folder"].glob("ckpt-*"))) <= checkpoint.KEEP


def test_a_job_that_ignores_the_signal_is_killed_after_the_grace_and_loses_only_work_since_its_last_save(tmp_path):
    grace = 1.0
    trace, seen = train_then_preempt(
        tmp_path, grace=grace, steps=300, step_s=0.05, save_every=1.0, use_helper=False, ignore_signal=True
    )
    assert seen["attempts"] == 2, seen
    saved = [s for e, a, s in trace if e == "saved" and a == 1]
    resumed = [s for e, a, s in trace if e == "start" and a == 2]
    assert not [e for e, a, _ in trace if e == "preempted"]
    assert resumed == saved[-1:], trace  # the last periodic save: only the steps after it are redone
    assert ("done", 2, 300) in trace


# --- Kubernetes: the pod spec ---------------------------------------------------------------------------------
def test_the_pod_has_a_grace_period_and_the_checkpoint_variables():
    from jupyter_gpusched.backends.kubernetes.config import KubernetesConfig
    from jupyter_gpusched.backends.kubernetes.manifests import build_manifests

    job, _ = build_manifests("j1", JobSpec("t.ipynb"), "{}", {}, KubernetesConfig(preempt_grace=45.5))
    pod = job["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 46
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert {"GPUSCHED_CHECKPOINT_DIR", "GPUSCHED_ATTEMPT"} <= set(env)
    assert env[checkpoint.REPORT_ENV]["value"] == "log"


# --- victims by real checkpoint times --------------------------------------------------------------------------
def test_the_victim_is_the_job_with_the_least_work_at_risk():
    """Two equal borrowers; the one that checkpointed a moment ago is preempted, not the one that never did
    (without the checkpoint time the later one, b, would be)."""
    s = Scheduler(Cluster([NodeSpec("n", 2)]), [Tenant("research", 0, 2), Tenant("prod", 2)], "dynamic")
    for name in ("a", "b"):
        s.submit(JobSpec(f"{name}.ipynb", gpus=1, tenant="research", preemptible=True), 0.0, job_id=name)
    for d in s.schedule(0.0):
        s.started(d.job_id, 0.0)
    s.checkpointed("a", 590.0)  # a saved 10 s ago; b has 600 s at risk
    s.submit(JobSpec("p.ipynb", gpus=1, tenant="prod"), 600.0, job_id="p")
    victims = [d.job_id for d in s.schedule(600.0) if isinstance(d, Preempt)]
    assert victims == ["a"]
