"""GPU kernels in hub mode, against a real JupyterHub: each user's server asks the hub service for its
kernels' GPUs (server/remote_kernels.py), so two users' kernels share one box by their groups' quotas.

2 virtual GPUs; alice (and carol) are in `vision`, bob in `nlp`, each tenant with a quota of 1 and no borrowing.
The service checks every second which users' servers run, the Hub polls its servers every second.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
import requests

from jupyter_gpusched.hub.orphans import REASON as ORPHAN_REASON
from jupyter_gpusched.server.provisioner import kernel_spec
from jupyter_gpusched.testing.gpukernels import ensure_provisioner_entry_point, process_env
from jupyter_gpusched.testing.hub import Hub, ServiceClient
from jupyter_gpusched.testing.waits import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

USERS = ["alice", "bob"]
SPEC = "python3-gpu1"


def kernel_hub(base: Path, groups: dict[str, list[str]], gpusched: dict, admins: tuple[str, ...] = ()):
    """A real Hub whose users' servers have the GPU kernelspec; skips where no Hub can start here."""
    extra = ensure_provisioner_entry_point(base / "entry-points")  # the users' servers must find the provisioner
    old_path = os.environ.get("PYTHONPATH")
    if extra is not None:  # the Hub passes PYTHONPATH on to the servers it spawns
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra), old_path) if p)
    h = Hub(
        base,
        groups=groups,
        admins=admins,
        hub_config=["c.Spawner.poll_interval = 1"],  # the Hub notices a dead server within a second
        gpusched={"kernel_server_check_interval": 1, "tick_interval": 0.2, **gpusched},
    )
    for user in {u for members in groups.values() for u in members}:  # the GPU kernelspec in each user's data folder
        folder = h.home(user) / ".local" / "share" / "jupyter" / "kernels" / SPEC
        folder.mkdir(parents=True)
        (folder / "kernel.json").write_text(__import__("json").dumps(kernel_spec(1)))
    try:
        h.start()
    except Exception as exc:  # noqa: BLE001 - Unavailable (no proxy) or a hub that cannot start here
        pytest.skip(str(exc))
    finally:
        if old_path is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_path
    return h


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = kernel_hub(
        tmp_path_factory.mktemp("hub-kernels"),
        groups={"vision": ["alice", "carol"], "nlp": ["bob"]},
        gpusched={
            "local_gpus": 2,
            "tenants": {"vision": {"quota": 1, "burst": 0}, "nlp": {"quota": 1, "burst": 0}},
            "default_tenant": "nlp",
            "group_tenants": {"vision": "vision", "nlp": "nlp"},
        },
    )
    yield h
    h.stop()


@pytest.fixture(scope="module")
def servers(hub):
    """Each user's server URL and a token of theirs."""
    out = {}
    for user in USERS:
        out[user] = (hub.start_server(user), hub.token(user))
    return out


def start_kernel(server: tuple[str, str]) -> str:
    url, token = server
    r = requests.post(
        f"{url}api/kernels", json={"name": SPEC}, headers={"Authorization": f"token {token}"}, timeout=120
    )
    assert r.status_code == 201, r.text
    return r.json()["id"]


def stop_kernel(server: tuple[str, str], kernel_id: str) -> None:
    url, token = server
    r = requests.delete(f"{url}api/kernels/{kernel_id}", headers={"Authorization": f"token {token}"}, timeout=60)
    assert r.status_code == 204, r.text


def find_process(match: str, **env_vars: str) -> tuple[int, dict[str, str]] | None:
    """A live process whose command line contains `match` and whose environment has `env_vars`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = process_env(int(pid))
            cmdline = Path(f"/proc/{pid}/cmdline").read_text()
        except OSError:
            continue
        if match in cmdline and all(env.get(k) == v for k, v in env_vars.items()):
            return int(pid), env
    return None


def kernel_gpus(job_id: str) -> str:
    """CUDA_VISIBLE_DEVICES of the live kernel process started for request `job_id` (found by its env)."""
    found = find_process("ipykernel", GPUSCHED_JOB_ID=job_id)
    assert found is not None, f"no kernel process for {job_id}"
    return found[1]["CUDA_VISIBLE_DEVICES"]


def kernel_request(api: ServiceClient, kernel_id: str) -> dict:
    code, body = api.json("GET", f"api/interactive/{kernel_id}")
    assert code == 200, body
    return body


def test_two_users_kernels_share_the_box_by_their_quotas(hub, servers):
    api = {u: ServiceClient(servers[u][0], servers[u][1]) for u in USERS}  # through each user's own server
    first = {u: start_kernel(servers[u]) for u in USERS}
    jobs = {u: kernel_request(api[u], first[u])["job"] for u in USERS}
    assert {u: j["state"] for u, j in jobs.items()} == {"alice": "RUNNING", "bob": "RUNNING"}
    assert (jobs["alice"]["owner"], jobs["alice"]["tenant"]) == ("alice", "vision")  # the service's attribution
    assert (jobs["bob"]["owner"], jobs["bob"]["tenant"]) == ("bob", "nlp")
    visible = {u: kernel_gpus(jobs[u]["id"]) for u in USERS}
    assert sorted(visible.values()) == ["0", "1"], visible  # one GPU each, distinct

    # alice's second kernel: her tenant's quota is used up, so it waits (a GPU is free for nobody else)
    second: dict[str, str] = {}
    waiter = threading.Thread(target=lambda: second.setdefault("id", start_kernel(servers["alice"])), daemon=True)
    waiter.start()

    def queued():
        code, page = api["alice"].json("GET", "api/jobs?interactive=true&state=QUEUED")
        return page["jobs"] if code == 200 and page["jobs"] else None

    waiting = wait_for(queued, 60, "alice's second kernel's request queued")[0]
    kernel_id = waiting["notebook"].removeprefix("kernel:")
    where = kernel_request(api["alice"], kernel_id)
    assert where["position"] == 1 and where["message"].startswith("waiting for a GPU: #1 in line"), where
    assert waiter.is_alive()  # the kernel is still starting

    stop_kernel(servers["alice"], first["alice"])  # her first kernel's GPU goes back at once
    waiter.join(90)
    assert second.get("id") == kernel_id
    assert kernel_request(api["alice"], kernel_id)["job"]["state"] == "RUNNING"
    assert kernel_gpus(waiting["id"]) == visible["alice"]  # it got the GPU her first kernel gave back
    assert kernel_request(api["alice"], first["alice"])["job"]["state"] == "CANCELLED"

    for user, kernel in (("alice", kernel_id), ("bob", first["bob"])):
        stop_kernel(servers[user], kernel)
    code, cluster = api["alice"].json("GET", "api/cluster")
    assert code == 200 and cluster["free_gpus"] == 2, cluster


def test_the_service_checks_an_interactive_request_like_a_job(hub, servers):
    api = ServiceClient(hub.service_url, servers["bob"][1])  # straight to the service, as bob
    code, body = api.json("POST", "api/jobs", json={"notebook": "kernel:k1", "interactive": True, "preemptible": True})
    assert code == 400 and body["field"] == "preemptible", body
    code, body = api.json("POST", "api/jobs", json={"notebook": "quick.ipynb", "interactive": True})
    assert code == 400 and body["field"] == "notebook", body
    code, body = api.json("POST", "api/jobs", json={"notebook": "kernel:k1", "interactive": True, "tenant": "vision"})
    assert code == 403, body  # not bob's tenant
    code, body = api.json("POST", "api/jobs", json={"notebook": "kernel:k1", "interactive": True, "gpus": 2})
    assert code == 400 and body["field"] == "gpus", body  # over nlp's interactive cap (its quota, 1)
    code, job = api.json("POST", "api/jobs", json={"notebook": "kernel:k1", "interactive": True})
    assert code == 201 and job["interactive"] and (job["owner"], job["tenant"]) == ("bob", "nlp"), job
    code, _ = api.json("DELETE", f"api/jobs/{job['id']}")
    assert code == 200


def test_a_server_killed_with_its_gpu_kernel_gives_the_gpu_back(hub, servers):
    """The server dies without shutting its kernel down: the hub service releases the kernel's
    reservation once the Hub no longer lists the server (hub/orphans.py), and another user's kernel
    waiting for that GPU starts on it."""
    alice_api = ServiceClient(servers["alice"][0], servers["alice"][1])
    kernel = start_kernel(servers["alice"])
    job = kernel_request(alice_api, kernel)["job"]
    assert job["state"] == "RUNNING", job
    gpu = kernel_gpus(job["id"])

    carol = (hub.start_server("carol"), hub.token("carol"))
    carol_api = ServiceClient(carol[0], carol[1])
    started: dict[str, str] = {}
    waiter = threading.Thread(target=lambda: started.setdefault("id", start_kernel(carol)), daemon=True)
    waiter.start()  # vision's one GPU is alice's kernel's: carol's kernel waits

    def queued():
        code, page = carol_api.json("GET", "api/jobs?interactive=true&state=QUEUED")
        return page["jobs"] if code == 200 and page["jobs"] else None

    waiting = wait_for(queued, 60, "carol's kernel's request queued")[0]
    assert waiter.is_alive()

    found = find_process("jupyterhub.singleuser", JUPYTERHUB_USER="alice")
    assert found is not None, "alice's server process"
    os.kill(found[0], signal.SIGKILL)  # no shutdown: its kernels' requests are never cancelled by it

    waiter.join(90)
    assert started.get("id") == waiting["notebook"].removeprefix("kernel:"), "carol's kernel did not start"
    assert kernel_request(carol_api, started["id"])["job"]["state"] == "RUNNING"
    assert kernel_gpus(waiting["id"]) == gpu  # the GPU alice's kernel held
    # alice's kernel process died with its server (ipykernel watches its parent)
    wait_for(lambda: find_process("ipykernel", GPUSCHED_JOB_ID=job["id"]) is None, 30, "alice's kernel to exit")
    as_alice = ServiceClient(hub.service_url, hub.token("alice"))  # her server is gone: straight to the service
    old = kernel_request(as_alice, kernel)["job"]
    assert old["id"] == job["id"] and old["state"] == "CANCELLED" and ORPHAN_REASON in old["reason"], old

    stop_kernel(carol, started["id"])
    code, cluster = carol_api.json("GET", "api/cluster")
    assert code == 200 and cluster["free_gpus"] == 2, cluster
