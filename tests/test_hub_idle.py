"""Idle reclaim of GPU kernels in hub mode, against a real JupyterHub (docs/interactive.md, "Idle reclaim"):
each user's server reports its GPU kernels' activity to the hub service (`POST interactive/{id}/activity`),
whose idle watch warns, then has the server shut the kernel down, while another user's kernel waits.

1 virtual GPU, one tenant for everyone: a second kernel always waits. Short idle settings (2 s, then 10 s of
warning); no assertion rests on tight timing: waits are generous, and "not reclaimed" is checked while the
kernel is known to be busy (its server says so before and after).
"""

from __future__ import annotations

import threading
import time

import pytest
import requests
from jupyter_client import BlockingKernelClient
from test_hub_kernels import find_process, kernel_hub, kernel_request, start_kernel, stop_kernel

from jupyter_gpusched.testing.hub import ServiceClient
from jupyter_gpusched.testing.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

IDLE = {"interactive_idle_timeout": 2.0, "interactive_idle_warning": 10.0, "interactive_keep_max": 30.0}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = kernel_hub(
        tmp_path_factory.mktemp("hub-idle"),
        groups={"team": ["alice", "bob"]},
        admins=("ada",),
        gpusched={"local_gpus": 1, "tenants": {"team": {"quota": 1}}, "group_tenants": {"team": "team"}, **IDLE},
    )
    yield h
    h.stop()


@pytest.fixture(scope="module")
def servers(hub):
    return {user: (hub.start_server(user), hub.token(user)) for user in ("alice", "bob")}


def start_waiting_kernel(server: tuple[str, str]) -> tuple[threading.Thread, dict[str, str]]:
    """Start a kernel in a thread (its start blocks while it waits for a GPU)."""
    started: dict[str, str] = {}

    def start():
        try:
            started["id"] = start_kernel(server)
        except AssertionError as exc:
            started["error"] = str(exc)

    waiter = threading.Thread(target=start, daemon=True)
    waiter.start()
    return waiter, started


def queued_request(api: ServiceClient) -> dict:
    def queued():
        code, page = api.json("GET", "api/jobs?interactive=true&state=QUEUED")
        return page["jobs"] if code == 200 and page["jobs"] else None

    return wait_for(queued, 60, "a kernel's request queued")[0]


def kernel_state(server: tuple[str, str], kernel_id: str) -> str | None:
    """The kernel's execution_state as its server sees it; None once the server no longer runs it."""
    url, token = server
    r = requests.get(f"{url}api/kernels/{kernel_id}", headers={"Authorization": f"token {token}"}, timeout=60)
    return r.json()["execution_state"] if r.status_code == 200 else None


def test_an_idle_hub_kernel_is_warned_kept_then_reclaimed_for_a_waiting_kernel(hub, servers):
    alice = ServiceClient(*servers["alice"])  # through her own server, as the lab calls it
    kernel = start_kernel(servers["alice"])
    job = kernel_request(alice, kernel)["job"]
    assert job["state"] == "RUNNING", job
    time.sleep(4)  # idle past the timeout, but nobody waits: no warning
    assert kernel_request(alice, kernel)["job"]["message"] == ""

    waiter, started = start_waiting_kernel(servers["bob"])
    waiting = queued_request(ServiceClient(*servers["bob"]))

    # hub isolation: bob (straight to the service, or through his server) can neither keep nor report on it
    for bob in (ServiceClient(hub.service_url, servers["bob"][1]), ServiceClient(*servers["bob"])):
        code, body = bob.json("POST", f"api/interactive/{kernel}/keep")
        assert code == 404, body
        code, body = bob.json(
            "POST", f"api/interactive/{kernel}/activity", json={"job_id": job["id"], "busy": True, "busy_seconds": 9}
        )
        assert code == 404, body
    ada = ServiceClient(hub.service_url, hub.token("ada"))  # an admin sees it, but is not its server
    code, body = ada.json("POST", f"api/interactive/{kernel}/activity", json={"job_id": job["id"], "busy": True})
    assert code == 403, body

    def warned():  # the lab's channel: the user's running kernel requests and their message
        code, page = alice.json("GET", "api/jobs?interactive=true&state=RUNNING")
        mine = [j for j in page["jobs"] if j["id"] == job["id"]] if code == 200 else []
        return mine[0] if mine and "will be given back" in mine[0]["message"] else None

    warning = wait_for(warned, 60, "the idle warning, through alice's server")
    assert warning["message"].startswith("this kernel's GPU will be given back in 1 minute"), warning
    code, kept = alice.json("POST", f"api/interactive/{kernel}/keep")  # the lab's Keep, through her server
    assert code == 200 and kept["kept_seconds"] > 0, kept

    waiter.join(120)  # still idle: warned again, then shut down by alice's server; bob's kernel starts
    assert started.get("id") == waiting["notebook"].removeprefix("kernel:"), started
    assert kernel_request(ServiceClient(*servers["bob"]), started["id"])["job"]["state"] == "RUNNING"
    wait_for(lambda: kernel_state(servers["alice"], kernel) is None, 60, "alice's server to drop her kernel")
    wait_for(lambda: find_process("ipykernel", GPUSCHED_JOB_ID=job["id"]) is None, 60, "alice's kernel to exit")
    ended = kernel_request(alice, kernel)["job"]
    assert ended["state"] == "CANCELLED" and "GPUs reclaimed" in ended["reason"], ended
    code, usage = alice.json("GET", "api/interactive")
    assert code == 200 and usage["users"]["alice"]["reclaims"] == 1, usage
    assert usage["users"]["alice"]["reclaimed_idle_gpu_hours"] > 0, usage

    stop_kernel(servers["bob"], started["id"])


def test_a_busy_hub_kernel_is_not_reclaimed_and_its_busy_time_counts(hub, servers):
    alice = ServiceClient(*servers["alice"])
    kernel = start_kernel(servers["alice"])
    assert kernel_request(alice, kernel)["job"]["state"] == "RUNNING"
    connection = next(hub.home("alice").rglob(f"kernel-{kernel}.json"))  # the kernel runs on this box
    client = BlockingKernelClient()
    client.load_connection_file(str(connection))
    client.start_channels()
    try:
        # The server learns "busy" from one status message on the kernel's iopub, and subscribes to it only
        # once the kernel is ready: code sent at once can run before the subscription holds, its "busy" lost
        # (CI failed on this once). So first the server must see a status: each kernel_info request makes the
        # kernel publish busy then idle, and the server's state leaves "starting" for "idle" on the first it sees.
        client.wait_for_ready(timeout=60)

        def server_sees_a_status() -> bool:
            client.kernel_info()
            return kernel_state(servers["alice"], kernel) == "idle"

        wait_for(server_sees_a_status, 60, "alice's server to see her kernel's status", interval=0.5)
        client.execute("import time; time.sleep(60)")
        wait_for(lambda: kernel_state(servers["alice"], kernel) == "busy", 60, "alice's kernel busy")
        waiter, started = start_waiting_kernel(servers["bob"])
        waiting = queued_request(ServiceClient(*servers["bob"]))
        time.sleep(16)  # past the idle timeout and its warning, bob waiting all along
        assert kernel_state(servers["alice"], kernel) == "busy"  # still busy: the whole stretch was
        now = kernel_request(alice, kernel)["job"]
        assert now["state"] == "RUNNING" and now["message"] == "", now
        assert (
            kernel_request(ServiceClient(*servers["bob"]), waiting["notebook"].removeprefix("kernel:"))["job"]["state"]
            == "QUEUED"
        )
        code, usage = alice.json("GET", "api/interactive")  # her server reported the busy seconds
        executing = [u["executing_gpu_hours"] for u in usage["users"].values()] if code == 200 else []
        assert executing and executing[0] * 3600 >= 3, usage
    finally:
        client.stop_channels()
    stop_kernel(servers["alice"], kernel)  # bob's kernel then starts on the GPU
    waiter.join(120)
    assert started.get("id") == waiting["notebook"].removeprefix("kernel:"), started
    stop_kernel(servers["bob"], started["id"])
