"""Results of Kubernetes jobs without a shared volume: the adopted jobs' pod-log copy (and, below, the upload).

Cluster tests run on the real test control plane (skipped, with the build command, when its binaries are not
built), as in test_k8s_cluster.py."""

from __future__ import annotations

import time

import pytest

from jupyter_gpusched.backends.kubernetes import KubernetesBackend
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.kwok import (
    backend_config,
    make_service,
    pod_prints,
    run_until,
    running_cluster,
    simulate,
)
from jupyter_gpusched.testing.kwok import control_plane_built as _built


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if not _built():
        pytest.skip("the Kubernetes test binaries are not built; run `bash scripts/k8s-testenv.sh build`")
    with running_cluster(tmp_path_factory.mktemp("k8s") / "cluster") as c:
        yield c


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
    service.store.close()  # (and so its claim on the store)
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


# --- results uploaded by the job's pod, no shared volume --------------------------------------------------------
FAKE_PAPERMILL = """
import json, os, sys, time
out = sys.argv[2]
nb = {"cells": [{"cell_type": "code", "source": "x = 1", "outputs": [], "metadata": {}, "execution_count": 1}],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(out, "w"))
time.sleep(1.0)  # (the uploader sends this first version while "cells" run)
nb["cells"].append({"cell_type": "code", "source": "print('done')", "outputs": [], "metadata": {},
                    "execution_count": 2})
json.dump(nb, open(out, "w"))
os.makedirs(os.path.join(os.path.dirname(out), "plots"), exist_ok=True)
open(os.path.join(os.path.dirname(out), "plots", "loss.csv"), "w").write("step,loss\\n1,0.5\\n")
"""


class UploadReceiver:
    """The service's real upload route (server/routes.py) on a real tornado HTTP server, in a thread."""

    def __init__(self, service, port: int):
        import asyncio
        import threading

        import tornado.web

        from jupyter_gpusched.server.routes import handlers
        from jupyter_gpusched.server.settings import SETTINGS_KEY, GPUSchedSettings

        routes = [(p, h) for p, h in handlers("/") if h.__name__ == "UploadHandler"]
        self.app = tornado.web.Application(routes, **{SETTINGS_KEY: GPUSchedSettings(service=service)})
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.server = self.app.listen(port, address="127.0.0.1")
            self.ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_pods_upload_results_with_a_job_scoped_token(cluster, tmp_path):
    import base64
    import json
    import subprocess
    import sys

    import requests

    from jupyter_gpusched.backends.kubernetes.upload import A_TOKEN_HASH, token_hash
    from jupyter_gpusched.testing.net import free_port

    ns = cluster.namespace("upload")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    service = make_service(tmp_path, cluster, ns, upload_url=url, upload_interval=0.2, max_upload_bytes=4096)
    receiver = UploadReceiver(service, port)
    try:
        a = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 60})
        b = service.submit(notebook="sim.ipynb", owner="u", gpus=1, parameters={"sim_duration": 60})
        run_until(service, lambda: a.state is JobState.RUNNING and b.state is JobState.RUNNING, timeout=30)
        jobs = {j["metadata"]["annotations"]["gpusched.io/job-id"]: j for j in cluster.jobs(ns)}
        tokens, env = {}, {}
        for job in (a, b):
            kj = jobs[job.id]
            secret = cluster.api.request("GET", f"/api/v1/namespaces/{ns}/secrets/{kj['metadata']['name']}-upload")
            tokens[job.id] = base64.b64decode(secret["data"]["upload-token"]).decode()
            # The Job carries only the token's hash; the pod gets the token from the Secret.
            assert kj["metadata"]["annotations"][A_TOKEN_HASH] == token_hash(tokens[job.id])
            assert tokens[job.id] not in json.dumps(kj)
            env[job.id] = {e["name"]: e for e in kj["spec"]["template"]["spec"]["containers"][0]["env"]}
            assert "secretKeyRef" in env[job.id]["GPUSCHED_UPLOAD_TOKEN"]["valueFrom"]

        # The pod's side, as the pod runs it: the uploader wrapping the notebook command, no shared volume.
        out = tmp_path / "pod-a" / "output"
        out.mkdir(parents=True)
        papermill = tmp_path / "pod-a" / "papermill"  # stands in for papermill: IN OUT ...
        papermill.write_text(f"#!{sys.executable}\n" + FAKE_PAPERMILL)
        papermill.chmod(0o755)
        script = "jupyter_gpusched/backends/kubernetes/pod_upload.py"
        pod_env = {
            "PATH": "/usr/bin:/bin",
            "GPUSCHED_UPLOAD_URL": env[a.id]["GPUSCHED_UPLOAD_URL"]["value"],
            "GPUSCHED_UPLOAD_TOKEN": tokens[a.id],
            "GPUSCHED_UPLOAD_INTERVAL": "0.2",
            "GPUSCHED_UPLOAD_MAX_BYTES": "4096",
        }
        assert pod_env["GPUSCHED_UPLOAD_URL"] == f"{url}gpusched/api/internal/jobs/{a.id}/upload"
        cmd = [sys.executable, script, str(papermill), "in.ipynb", str(out / "output.ipynb"), "-f", "p.json"]
        proc = subprocess.run(cmd, env=pod_env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert "failed" not in proc.stderr, proc.stderr
        uploaded = json.loads(service.output_file(a.id).read_text())
        assert len(uploaded["cells"]) == 2  # the final notebook
        assert (service.job_dir(a.id) / "outputs" / "plots" / "loss.csv").read_text() == "step,loss\n1,0.5\n"

        base = f"{url}gpusched/api/internal/jobs"
        head = {"X-Gpusched-Upload-Token": tokens[a.id]}
        # A's token cannot upload to B, nor read anything (PUT is the only method), nor pass the size cap.
        assert requests.put(f"{base}/{b.id}/upload/notebook", data=b"{}", headers=head).status_code == 403
        assert requests.put(f"{base}/{b.id}/upload/notebook", data=b"{}").status_code == 403
        assert requests.get(f"{base}/{a.id}/upload/notebook", headers=head).status_code == 405
        # ("%2F": a client would drop a literal "../" from the URL itself)
        assert requests.put(f"{base}/{a.id}/upload/files/..%2Fescape", data=b"1", headers=head).status_code == 400
        assert not (service.job_dir(a.id) / "escape").exists()
        assert requests.put(f"{base}/{a.id}/upload/files/big", data=b"x" * 5000, headers=head).status_code == 413
        assert requests.put(f"{base}/{a.id}/upload/files/ok.txt", data=b"1", headers=head).status_code == 204
        assert not (service.job_dir(b.id) / "output.ipynb").exists()
        # Once the job has ended, its token is refused.
        service.cancel(a.id, "u")
        run_until(service, lambda: a.state.terminal, timeout=30, what="a cancelled")
        assert requests.put(f"{base}/{a.id}/upload/files/late.txt", data=b"1", headers=head).status_code == 403
        assert tokens[a.id] not in service.log_file(a.id).read_text()
    finally:
        receiver.close()
        service.backend.delete_all_jobs()
        service.backend.close()
