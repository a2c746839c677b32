"""GPU kernels through a real Jupyter server's kernels API, with 4 virtual GPUs on the local backend:
each kernel waits in the scheduler's queue, starts on its own GPUs, and gives them back when it ends."""

from __future__ import annotations

import asyncio
import json

import pytest

from jupyter_gpusched.cli.kernelspec import install
from jupyter_gpusched.core import JobState
from jupyter_gpusched.testing.gpukernels import ensure_provisioner_entry_point, process_env
from jupyter_gpusched.testing.waits import wait_for_async

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def gpusched_config():
    return {"local_gpus": 4}


@pytest.fixture
def gpu_kernelspec(jp_data_dir, tmp_path):
    ensure_provisioner_entry_point(tmp_path / "entry-points")
    install(1, prefix=None, user=True)  # JUPYTER_DATA_DIR is the test's jp_data_dir
    return "python3-gpu1"


async def start_kernel(jp_fetch, name: str) -> str:
    r = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": name}))
    return json.loads(r.body)["id"]


def kernel_gpus(jp_serverapp, kernel_id: str) -> str:
    provisioner = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner
    return process_env(provisioner.process.pid)["CUDA_VISIBLE_DEVICES"]


async def ready_and_watched(jp_serverapp, kernel_id: str, client) -> None:
    """The kernel answers and its server has seen a status of it: the server subscribes to a kernel's iopub
    only once it is ready and learns "busy" from one status message, so code run before that subscription
    holds could look idle to it (tests/test_hub_idle.py met this in CI). Each kernel_info request makes the
    kernel publish a status; the server's state leaves "starting" on the first it sees."""
    await client.wait_for_ready(timeout=30)
    kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)

    async def seen():
        client.kernel_info()
        return kernel.execution_state != "starting" or None

    await wait_for_async(seen, 30, "the server to see the kernel's status", interval=0.5)


def interactive_jobs(service, state: JobState | None = None):
    return [j for j in service.scheduler.jobs.values() if j.spec.interactive and (state is None or j.state is state)]


async def test_five_kernels_on_four_gpus(jp_fetch, jp_serverapp, service, api, gpu_kernelspec):
    kernels = [await start_kernel(jp_fetch, gpu_kernelspec) for _ in range(4)]
    visible = {k: kernel_gpus(jp_serverapp, k) for k in kernels}
    assert sorted(visible.values()) == ["0", "1", "2", "3"], visible  # four distinct GPUs

    fifth = asyncio.ensure_future(start_kernel(jp_fetch, gpu_kernelspec))
    queued = await wait_for_async(
        lambda: _async(interactive_jobs(service, JobState.QUEUED)), 30, "the fifth kernel's request queued"
    )
    code, job = await api("GET", f"jobs/{queued[0].id}")
    assert code == 200 and job["interactive"] and job["position"] == 0, job  # first in line
    code, queues = await api("GET", "queues")
    assert queues["queues"]["default"]["interactive_queued"] == 1
    assert queues["queues"]["default"]["interactive_running"] == 4
    kernel_id = queued[0].spec.notebook.removeprefix("kernel:")
    code, status = await api("GET", f"interactive/{kernel_id}")
    assert code == 200 and status["position"] == 1 and status["job"]["id"] == queued[0].id, status
    assert status["message"].startswith("waiting for a GPU: #1 in line"), status
    code, _ = await api("GET", "interactive/no-such-kernel")
    assert code == 404
    assert not fifth.done()  # the kernel is still starting

    freed = kernel_gpus(jp_serverapp, kernels[1])
    await jp_fetch("api", "kernels", kernels[1], method="DELETE")
    new = await asyncio.wait_for(fifth, 60)
    assert kernel_gpus(jp_serverapp, new) == freed  # it got the GPU the shut-down kernel gave back
    done = service.get(next(j for j in interactive_jobs(service) if j.spec.notebook == f"kernel:{kernels[1]}").id)
    assert done.state is JobState.CANCELLED and not done.allocation

    for k in (kernels[0], kernels[2], kernels[3], new):
        await jp_fetch("api", "kernels", k, method="DELETE")
    assert service.scheduler.cluster.free_gpus == 4  # every GPU back
    assert all(j.state is JobState.CANCELLED for j in interactive_jobs(service))


async def test_cancelling_a_waiting_request_fails_the_kernel_start(jp_fetch, service, api, gpu_kernelspec):
    holders = [await start_kernel(jp_fetch, gpu_kernelspec) for _ in range(4)]
    fifth = asyncio.ensure_future(start_kernel(jp_fetch, gpu_kernelspec))
    queued = await wait_for_async(lambda: _async(interactive_jobs(service, JobState.QUEUED)), 30, "a queued request")
    code, _ = await api("DELETE", f"jobs/{queued[0].id}")
    assert code in (200, 202, 204)
    with pytest.raises(Exception):  # noqa: B017 - the kernels API answers 500 for a kernel that could not start
        await asyncio.wait_for(fifth, 30)
    for k in holders:
        await jp_fetch("api", "kernels", k, method="DELETE")
    assert service.scheduler.cluster.free_gpus == 4


async def _async(value):
    return value


def test_a_restart_releases_kernel_requests_never_adopts_them(tmp_path):
    """A kernel's request read back after a restart is cancelled (its kernel went with the old server):
    the GPUs it held and the place it waited for are freed; a notebook job's recovery is unchanged."""
    from jupyter_gpusched.service.interactive import RESTART_REASON
    from jupyter_gpusched.testing.service import make_service

    first = make_service(tmp_path)
    held = first.submit(notebook="kernel:a", owner="me", interactive=True)
    first.tick()
    waiting_one = first.submit(notebook="kernel:b", owner="me", gpus=2, interactive=True)
    first.tick()
    assert (held.state, waiting_one.state) == (JobState.RUNNING, JobState.QUEUED)
    first.store.close()  # the server died: nothing was released

    second = make_service(tmp_path)
    for job_id in (held.id, waiting_one.id):
        job = second.get(job_id)
        assert job.state is JobState.CANCELLED and job.reason == RESTART_REASON
    assert second.scheduler.cluster.free_gpus == 2 and second.scheduler.ledger.used.get("default", 0) == 0
    assert second.store.load_jobs()  # the cancellations are written down
    assert {j.id: j.state for j, _ in second.store.load_jobs()}[held.id] is JobState.CANCELLED
    second.store.close()


def test_the_hub_service_keeps_kernel_requests_across_its_restart(tmp_path):
    """In the hub service the kernels live in the users' servers, which its restart leaves running: their
    reservations keep their GPUs and their place in line (hub/orphans.py releases those whose server went)."""
    from jupyter_gpusched.backends.local import LocalBackend
    from jupyter_gpusched.testing.service import service_in

    def hub_service():
        backend = LocalBackend(virtual_gpus=2, heartbeat_interval=0.5)
        return service_in(tmp_path, backend, kernels_outlive_restart=True, memory_check_interval=0.0)

    first = hub_service()
    held = first.submit(notebook="kernel:a", owner="me", interactive=True)
    first.tick()
    waiting_one = first.submit(notebook="kernel:b", owner="me", gpus=2, interactive=True)
    first.tick()
    assert (held.state, waiting_one.state) == (JobState.RUNNING, JobState.QUEUED)
    gpus = held.allocation
    first.backend.close()
    first.store.close()

    second = hub_service()
    kept, still_waiting = second.get(held.id), second.get(waiting_one.id)
    assert kept.state is JobState.RUNNING and kept.allocation == gpus
    assert still_waiting.state is JobState.QUEUED and second.scheduler.position(still_waiting.id) == 0
    assert second.scheduler.cluster.free_gpus == 1
    second.tick()
    assert still_waiting.state is JobState.QUEUED  # the held GPU is still held: no double booking
    second.cancel(kept.id, "me")  # the kernel shuts down: its GPU goes to the one waiting
    for _ in range(3):
        second.tick()
    assert still_waiting.state is JobState.RUNNING
    second.backend.close()
    second.store.close()


IDLE = {"interactive_idle_timeout": 1.0, "interactive_idle_warning": 1.5, "interactive_keep_max": 30.0}


@pytest.mark.parametrize("gpusched_config", [{"local_gpus": 1, **IDLE}])
async def test_an_idle_kernel_is_warned_then_reclaimed_for_a_waiting_job(
    jp_fetch, jp_serverapp, jp_root_dir, service, api, gpu_kernelspec
):
    from jupyter_gpusched.testing.notebooks import make_notebook
    from jupyter_gpusched.testing.waits import wait_for_state

    kernel = await start_kernel(jp_fetch, gpu_kernelspec)
    request = interactive_jobs(service, JobState.RUNNING)[0]
    await asyncio.sleep(2.5)  # idle past the timeout, but nobody waits: nothing happens
    assert kernel in jp_serverapp.kernel_manager and not service.info[request.id].message

    make_notebook(jp_root_dir / "job.ipynb", "print('ran')")
    code, job = await api("POST", "jobs", {"notebook": "job.ipynb"})
    assert code == 201, job

    async def warned():
        code, status = await api("GET", f"interactive/{kernel}")
        return status if "will be given back" in status["job"]["message"] else None

    status = await wait_for_async(warned, 20, "the idle warning")
    assert status["job"]["message"].startswith("this kernel's GPU will be given back in 1 minute")
    code, kept = await api("POST", f"interactive/{kernel}/keep")  # the Keep action restarts the clock
    assert code == 200 and kept["kept_seconds"] > 0
    assert service.info[request.id].message == ""

    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"}, timeout=60)  # warned again, reclaimed
    assert done["state"] == "SUCCEEDED", done
    assert kernel not in jp_serverapp.kernel_manager  # the server shut the kernel down
    assert request.state is JobState.CANCELLED and "GPUs reclaimed" in request.reason


@pytest.mark.parametrize("gpusched_config", [{"local_gpus": 1, **IDLE}])
async def test_a_busy_kernel_is_never_reclaimed(jp_fetch, jp_serverapp, jp_root_dir, service, api, gpu_kernelspec):
    from jupyter_gpusched.testing.notebooks import make_notebook

    kernel = await start_kernel(jp_fetch, gpu_kernelspec)
    client = jp_serverapp.kernel_manager.get_kernel(kernel).client()
    client.start_channels()
    await ready_and_watched(jp_serverapp, kernel, client)
    client.execute("import time; time.sleep(8)")
    make_notebook(jp_root_dir / "job.ipynb", "print('ran')")
    code, job = await api("POST", "jobs", {"notebook": "job.ipynb"})
    assert code == 201
    await asyncio.sleep(6)  # four idle timeouts and more, a job waiting all along
    assert kernel in jp_serverapp.kernel_manager
    assert interactive_jobs(service, JobState.RUNNING) and not service.info[interactive_jobs(service)[0].id].message
    code, waiting_job = await api("GET", f"jobs/{job['id']}")
    assert waiting_job["state"] == "QUEUED"
    client.stop_channels()
    await jp_fetch("api", "kernels", kernel, method="DELETE")


@pytest.mark.parametrize("gpusched_config", [{"local_gpus": 1, **IDLE}])
async def test_a_kernel_running_code_its_server_sees_as_idle_is_not_reclaimed(
    jp_fetch, jp_serverapp, jp_root_dir, service, api, gpu_kernelspec
):
    """The server learns "busy" from one status message, and code sent before its iopub subscription holds
    publishes that message unseen: the server then sees the running kernel as idle. Made here by setting the
    server's state back to idle while a cell runs; a reclaim asks the kernel itself first, and it is busy."""
    from jupyter_gpusched.testing.notebooks import make_notebook

    kernel = await start_kernel(jp_fetch, gpu_kernelspec)
    client = jp_serverapp.kernel_manager.get_kernel(kernel).client()
    client.start_channels()
    await ready_and_watched(jp_serverapp, kernel, client)
    client.execute("import time; time.sleep(60)")
    server_view = jp_serverapp.kernel_manager.get_kernel(kernel)

    async def busy():
        return server_view.execution_state == "busy" or None

    await wait_for_async(busy, 30, "the server to see the kernel busy")
    server_view.execution_state = "idle"  # what the server believes when it missed the "busy"
    make_notebook(jp_root_dir / "job.ipynb", "print('ran')")
    code, job = await api("POST", "jobs", {"notebook": "job.ipynb"})
    assert code == 201
    await asyncio.sleep(12)  # warned, reclaim tried (the kernel does not answer), warned and tried again
    assert kernel in jp_serverapp.kernel_manager
    request = interactive_jobs(service)[0]
    assert request.state is JobState.RUNNING and service.info[request.id].reclaimed_idle_s is None
    code, waiting_job = await api("GET", f"jobs/{job['id']}")
    assert waiting_job["state"] == "QUEUED"
    client.stop_channels()
    await jp_fetch("api", "kernels", kernel, method="DELETE")


async def test_activity_reports_are_checked(jp_fetch, service, api, gpu_kernelspec):
    """`POST interactive/{id}/activity` is for hub mode (a user's server reporting to the hub service): bad
    bodies are 400s, another request's id a 409, and a kernel this server watches itself is not reported on."""
    kernel = await start_kernel(jp_fetch, gpu_kernelspec)
    request = interactive_jobs(service, JobState.RUNNING)[0]
    path = f"interactive/{kernel}/activity"
    for body, field in (
        ({"job_id": request.id, "busy": "yes"}, "busy"),
        ({"job_id": request.id, "busy": False, "busy_seconds": -1}, "busy_seconds"),
        ({"job_id": request.id, "busy": False, "idle_seconds": True}, "idle_seconds"),
    ):
        code, answer = await api("POST", path, body)
        assert code == 400 and answer["field"] == field, answer
    code, answer = await api("POST", path, {"job_id": "not-its-request", "busy": False})
    assert code == 409 and answer["field"] == "job_id", answer
    code, answer = await api("POST", path, {"job_id": request.id, "busy": False, "busy_seconds": 5})
    assert code == 409 and "watched by this server itself" in answer["message"], answer
    assert service.info[request.id].busy_s < 5  # the refused report counted nothing
    code, answer = await api("POST", "interactive/no-such-kernel/activity", {"job_id": request.id, "busy": False})
    assert code == 404, answer
    await jp_fetch("api", "kernels", kernel, method="DELETE")


def test_the_packaged_kernelspec_is_the_one_the_command_writes(tmp_path):
    from jupyter_gpusched.server.provisioner import PROVISIONER_NAME, kernel_spec

    from conftest import PROJECT_ROOT

    packaged = json.loads((PROJECT_ROOT / "jupyter-config/kernels/python3-gpu1/kernel.json").read_text())
    assert packaged == kernel_spec(1)
    assert packaged["display_name"] == "Python 3 (1 GPU)"
    assert packaged["metadata"]["kernel_provisioner"] == {
        "provisioner_name": PROVISIONER_NAME,
        "config": {"gpus": 1, "priority": "normal"},
    }
    path = install(2, "high", "vision", prefix=str(tmp_path))
    spec = json.loads((tmp_path / "share/jupyter/kernels/python3-gpu2/kernel.json").read_text())
    assert path.endswith("python3-gpu2") and spec["display_name"] == "Python 3 (2 GPUs)"
    assert spec["metadata"]["kernel_provisioner"]["config"] == {"gpus": 2, "priority": "high", "tenant": "vision"}


def _metric(text: str, name: str) -> float:
    """The one sample of `name` (one user here) in a Prometheus text answer; 0 when absent."""
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{")]
    assert len(values) <= 1, values
    return values[0] if values else 0.0


@pytest.mark.parametrize("gpusched_config", [{"local_gpus": 4, **IDLE}])
async def test_interactive_metrics_held_vs_executing_and_reclaimed(
    jp_fetch, jp_serverapp, jp_root_dir, service, api, gpu_kernelspec
):
    """One kernel busy for a while, one idle and reclaimed for a waiting job: GPU-hours held grow, executing
    grows only with the busy one, and the idle one's GPU-hours show as reclaimed (JSON and Prometheus)."""
    from jupyter_gpusched.testing.notebooks import make_notebook
    from jupyter_gpusched.testing.waits import wait_for_state

    busy, idle = await start_kernel(jp_fetch, gpu_kernelspec), await start_kernel(jp_fetch, gpu_kernelspec)
    code, before = await api("GET", "interactive")
    assert code == 200 and before["users"], before
    (user, first), *_ = before["users"].items()
    assert first["kernels"] == 2 and first["reclaims"] == 0 and first["reclaimed_idle_gpu_hours"] == 0

    client = jp_serverapp.kernel_manager.get_kernel(busy).client()
    client.start_channels()
    await ready_and_watched(jp_serverapp, busy, client)
    client.execute("import time; time.sleep(6)")
    make_notebook(jp_root_dir / "job.ipynb", "print('ran')")
    code, job = await api("POST", "jobs", {"notebook": "job.ipynb", "gpus": 3})  # 2 free: it waits
    assert code == 201, job
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"}, timeout=90)  # the idle one gave way
    assert done["state"] == "SUCCEEDED", done
    assert idle not in jp_serverapp.kernel_manager and busy in jp_serverapp.kernel_manager

    async def busy_done():
        return jp_serverapp.kernel_manager.get_kernel(busy).execution_state == "idle" or None

    await wait_for_async(busy_done, 30, "the busy kernel's cell done")
    await asyncio.sleep(1.5)  # one more look by its provisioner
    requests_of = {j.spec.notebook.removeprefix("kernel:"): j for j in interactive_jobs(service)}
    busy_s = service.info[requests_of[busy].id].busy_s
    idle_info = service.info[requests_of[idle].id]
    assert busy_s >= 3 and idle_info.busy_s < busy_s, (busy_s, idle_info)
    assert idle_info.reclaimed_idle_s is not None and idle_info.reclaimed_idle_s >= IDLE["interactive_idle_timeout"]

    code, after = await api("GET", "interactive")
    now = after["users"][user]
    assert now["held_gpu_hours"] > first["held_gpu_hours"]
    assert busy_s / 3600 * 0.99 <= now["executing_gpu_hours"] < now["held_gpu_hours"]
    assert now["reclaims"] == 1 and now["reclaimed_idle_gpu_hours"] == pytest.approx(idle_info.reclaimed_idle_s / 3600)
    text = (await jp_fetch("gpusched", "metrics")).body.decode()
    assert f'gpusched_interactive_reclaims_total{{user="{user}"}} 1' in text
    assert _metric(text, "gpusched_interactive_held_gpu_hours") >= now["held_gpu_hours"]
    assert _metric(text, "gpusched_interactive_executing_gpu_hours") >= now["executing_gpu_hours"] > 0
    assert _metric(text, "gpusched_interactive_reclaimed_idle_gpu_hours") == pytest.approx(
        now["reclaimed_idle_gpu_hours"]
    )
    client.stop_channels()
    await jp_fetch("api", "kernels", busy, method="DELETE")
