"""Notifications survive a server crash: a delivery the store has no record of is sent again after the restart
(at-least-once), one it has a record of is not. The job is submitted with the real CLI, to a real server."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from jupyter_gpusched.testing.jupyter import new_live_server
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.receivers import Receiver
from jupyter_gpusched.testing.waits import wait_until

pytestmark = pytest.mark.timeout(300)
SECRET = "restart-secret"


def test_an_unrecorded_delivery_is_sent_after_a_crash_and_a_recorded_one_is_not(tmp_path):
    receiver = Receiver().start()
    receiver.fail["/down"] = 10**6  # down until the server has crashed
    server = new_live_server(
        tmp_path, "--GPUSched.local_gpus=1", f"--GPUSched.webhook_secret={SECRET}", "--GPUSched.notify_backoff=0.2"
    )
    make_notebook(server.root / "nb.ipynb", "x = 1")
    try:
        server.start()
        env = {**os.environ, "GPUSCHED_URL": server.url, "GPUSCHED_TOKEN": server.token}
        submitted = subprocess.run(
            [sys.executable, "-m", "jupyter_gpusched.cli", "submit", "nb.ipynb", "--notify", receiver.url("/down")],
            capture_output=True,
            text=True,
            cwd=server.root,
            env=env,
            timeout=60,
        )
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.split()[1].rstrip(":")
        assert server.api("GET", f"jobs/{job_id}").json()["notify"][0]["webhook"] == receiver.url("/down")
        server.wait_for_state(job_id, {"SUCCEEDED"})
        wait_until(lambda: len(receiver.to("/down")) >= 2, 30, "the first tries (refused)")
        server.kill()  # mid-retry: the delivery is not recorded

        receiver.fail["/down"] = 0
        server.start()
        wait_until(lambda: receiver.to("/down", 200), 30, "the delivery, sent again after the restart")
        keys = {c.headers["x-gpusched-delivery"] for c in receiver.to("/down")}
        assert len(keys) == 1  # the same delivery, so a receiver can drop repeats
        assert receiver.to("/down", 200)[0].signed_by(SECRET)

        # Recorded now: the next restart sends it no more (a job sent after the restart arrives; it does not).
        key = keys.pop()
        wait_until(lambda: key in server.api("GET", f"jobs/{job_id}").json()["notified"], 30, "the delivery recorded")
        server.stop()
        server.start()
        job = server.api("POST", "jobs", {"notebook": "nb.ipynb", "notify": [receiver.url("/after")]}).json()
        server.wait_for_state(job["id"], {"SUCCEEDED"})
        wait_until(lambda: receiver.to("/after", 200), 30, "the later job's notification")
        assert len(receiver.to("/down", 200)) == 1
    finally:
        server.stop()
        receiver.stop()
