"""LocalBackend with real runner processes, real papermill and real ipykernel kernels."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from jupyter_gpusched.backends import BackendError, LaunchRequest, LocalBackend, log_path, output_path
from jupyter_gpusched.backends.base import validate_parameters
from jupyter_gpusched.backends.local import max_runtime_message
from jupyter_gpusched.core.model import NodeSpec
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import run_to_end, wait_until

LINUX = sys.platform.startswith("linux")
MALICIOUS = "'); import os; os.system('touch HACKED'); ('"
MALICIOUS_2 = '"; import os; os.system("touch HACKED2") # \\" \n"""\'\'\' \\'


def request(tmp_path: Path, job_id: str, notebook: Path, **kw) -> LaunchRequest:
    kw.setdefault("parameters", {})
    kw.setdefault("gpu_ids", (0,))
    kw.setdefault("max_runtime", 120.0)
    return LaunchRequest(
        job_id=job_id, notebook=notebook, cwd=notebook.parent, job_dir=tmp_path / "jobs" / job_id, **kw
    )


def alive(pid: int) -> bool:
    """Is `pid` a running process? A zombie (dead, not yet reaped) counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return not LINUX  # without /proc we cannot see zombies
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for_pid(path: Path, timeout: float = 30.0) -> int:
    """The pid a runner writes to `path` (e.g. job_dir/kernel_pid), once it is there."""
    return int(wait_until(lambda: path.exists() and path.read_text().strip(), timeout, f"{path.name} to be written"))


def stream_text(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def kill_leftovers(*pids: int | None) -> None:
    for pid in pids:
        if pid and alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def backend():
    b = LocalBackend(node_name="n1", virtual_gpus=4, heartbeat_interval=0.3)
    yield b
    b.close()


# --- running notebooks ----------------------------------------------------------------------
def test_success_and_failure_with_parameters_env_log_and_progress(tmp_path, backend):
    params = {"alpha": 42, "evil": MALICIOUS, "evil2": MALICIOUS_2, "nested": {"k": [1, "two", None, 2.5]}}
    good = make_notebook(
        tmp_path / "good" / "train.ipynb",
        "import os, json, sys, time\nprint('CVD=' + repr(os.environ['CUDA_VISIBLE_DEVICES']))\nprint('EXE=' + sys.executable)",
        "time.sleep(1.2)  # long enough for periodic heartbeats",
        "print('alpha*2 =', alpha * 2)\n"
        "print('PARAMS=' + json.dumps({'evil': evil, 'evil2': evil2, 'nested': nested}))\n"
        "print('types', type(evil).__name__, type(evil2).__name__)",
        parameters="alpha = 0\nevil = ''\nevil2 = ''\nnested = {}",
    )
    bad = make_notebook(
        tmp_path / "bad" / "broken.ipynb",
        "import os\nprint('CVD=' + repr(os.environ['CUDA_VISIBLE_DEVICES']))",
        "1 / 0",
        "print('never reached')",
        kernelspec=False,  # no kernelspec in the notebook: python3
    )
    backend.launch(request(tmp_path, "good", good, parameters=params, gpu_ids=(1, 3)))
    backend.launch(request(tmp_path, "bad", bad, gpu_ids=()))
    backend.launch(request(tmp_path, "nokernel", bad, kernel_name="no-such-kernel"))
    assert backend.running() == {"good", "bad", "nokernel"}

    updates = run_to_end(backend, {"good", "bad", "nokernel"})
    assert backend.running() == set()
    assert backend.poll() == []  # nothing more to say about finished jobs

    # -- the good job: started, heartbeats with growing progress, succeeded
    ups = updates["good"]
    assert ups[0].kind == "started" and ups[-1].kind == "succeeded", ups
    beats = [u for u in ups if u.kind == "heartbeat"]
    assert len(beats) >= 3, ups
    progress = [u.progress for u in beats if u.progress is not None]
    assert progress and progress == sorted(progress), progress
    assert any(0 < done < total for done, total in progress), progress  # seen mid-run
    # 4 code cells of the notebook's own: parameters and 3 more (papermill's injected cell does not count)
    assert progress[-1] == (4, 4) and ups[-1].progress == (4, 4)
    assert all(a.time <= b.time for a, b in zip(beats, beats[1:], strict=False))

    job_dir = tmp_path / "jobs" / "good"
    out = nbformat.read(str(output_path(job_dir)), as_version=4)
    text = stream_text(out)
    assert "CVD='1,3'" in text
    assert f"EXE={sys.executable}" in text  # the python3 kernelspec ran this venv's python
    assert "alpha*2 = 84" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("PARAMS="))
    assert json.loads(line[len("PARAMS=") :]) == {k: params[k] for k in ("evil", "evil2", "nested")}
    assert "types str str" in text
    # the injected cell comes right after the cell tagged "parameters"
    assert "parameters" in out.cells[0].metadata.tags
    assert "injected-parameters" in out.cells[1].metadata.tags
    for name in ("HACKED", "HACKED2"):
        assert not (good.parent / name).exists()
        assert not (job_dir / name).exists()
    log = log_path(job_dir).read_text()
    assert "alpha*2 = 84" in log  # cell output streams into the log
    assert "1,3" in log

    # -- the bad job: failed with the exception line, executed notebook still written
    ups = updates["bad"]
    assert ups[0].kind == "started" and ups[-1].kind == "failed", ups
    assert ups[-1].message == "ZeroDivisionError: division by zero (cell 2)"
    out = nbformat.read(str(output_path(tmp_path / "jobs" / "bad")), as_version=4)
    assert "CVD=''" in stream_text(out)
    errors = [o for c in out.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert [e.ename for e in errors] == ["ZeroDivisionError"]
    assert "never reached" not in stream_text(out)
    assert "ZeroDivisionError" in log_path(tmp_path / "jobs" / "bad").read_text()

    # -- a kernel that is not installed: failed with a readable line
    assert updates["nokernel"][-1].kind == "failed"
    assert updates["nokernel"][-1].message == "NoSuchKernel: No such kernel named no-such-kernel"


def test_launch_rejects_bad_input_without_starting_anything(tmp_path, backend):
    nb = make_notebook(tmp_path / "nb.ipynb", "x = 1")
    bad = [
        request(tmp_path, "a", tmp_path / "missing.ipynb"),
        request(tmp_path, "b", nb, parameters={"x = 1\nimport os; os.system('touch HACKED')\ny": 1}),
        request(tmp_path, "c", nb, parameters={"class": 1}),
        request(tmp_path, "d", nb, parameters={"x": object()}),
        request(tmp_path, "e", nb, gpu_ids=(-1,)),
        request(tmp_path, "f", nb, max_runtime=0),
    ]
    for req in bad:
        with pytest.raises(BackendError):
            backend.launch(req)
    assert backend.running() == set()
    assert backend.poll() == []
    assert not (tmp_path / "HACKED").exists()
    with pytest.raises(BackendError, match="cannot start the runner"):
        LocalBackend(python=str(tmp_path / "no-python")).launch(request(tmp_path, "g", nb))


def test_max_runtime_message():
    assert max_runtime_message(60.0) == "max_runtime exceeded (60 s)"
    assert max_runtime_message(2.5) == "max_runtime exceeded (2.5 s)"


def test_validate_parameters():
    assert validate_parameters({"a": 1, "b": [1, (2, 3)], "c": {"d": None}}) == {
        "a": 1,
        "b": [1, [2, 3]],
        "c": {"d": None},
    }
    for params in ({"1x": 1}, {"a b": 1}, {"lambda": 1}, {"a": {1: 2}}, {"a": {1, 2}}, {"a": b"bytes"}):
        with pytest.raises(ValueError):
            validate_parameters(params)


# --- stopping -------------------------------------------------------------------------------
def test_cancel_kills_runner_kernel_and_their_children(tmp_path, backend):
    nb = make_notebook(
        tmp_path / "spin" / "spin.ipynb",
        "import json, os, subprocess, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        "detached = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "json.dump({'kernel': os.getpid(), 'child': child.pid, 'detached': detached.pid}, open('pids.json', 'w'))",
        "time.sleep(300)",
    )
    req = request(tmp_path, "spin", nb)
    backend.launch(req)
    pids_file = nb.parent / "pids.json"
    pids = {}
    try:
        pids = json.loads(wait_until(lambda: pids_file.exists() and pids_file.read_text(), 30, "the notebook to start"))
        runner = int((req.job_dir / "pid").read_text())
        assert int((req.job_dir / "kernel_pid").read_text()) == pids["kernel"]  # the runner recorded its kernel
        pids["runner"] = runner
        assert all(alive(p) for p in pids.values()), pids
        assert os.getpgid(runner) == runner and os.getpgid(pids["kernel"]) == pids["kernel"]
        with pytest.raises(BackendError, match="already running"):
            backend.launch(req)
        backend.poll()

        t0 = time.monotonic()
        backend.kill("spin", "cancelled by the user")
        assert time.monotonic() - t0 < LocalBackend.kill_grace + 2
        survivors = {name: pid for name, pid in pids.items() if alive(pid)}
        if not LINUX:  # only the /proc sweep finds a child that left the kernel's session
            survivors.pop("detached", None)
        assert survivors == {}
        assert backend.running() == set()
        assert [u for u in backend.poll() if u.kind in ("succeeded", "failed")] == []  # killed on purpose
        backend.kill("spin", "again")  # idempotent
        backend.kill("never-started", "no such job")
        nbformat.read(str(output_path(req.job_dir)), as_version=4)  # a readable partial output
        assert "killed (cancelled by the user)" in log_path(req.job_dir).read_text()
    finally:
        kill_leftovers(*pids.values())


def test_max_runtime_kills_a_sleeping_notebook(tmp_path, backend):
    nb = make_notebook(tmp_path / "slow" / "slow.ipynb", "import time\ntime.sleep(60)")
    # 15 s: the kernel must be up before the deadline for its kill to be checked, and a kernel takes
    # seconds to start on a loaded machine.
    req = request(tmp_path, "slow", nb, max_runtime=15)
    t0 = time.monotonic()
    backend.launch(req)
    runner = int((req.job_dir / "pid").read_text())
    kernel = None
    try:
        updates = []
        while not updates or updates[-1].kind not in ("succeeded", "failed"):
            updates += backend.poll()
            kernel = kernel or ((req.job_dir / "kernel_pid").exists() and int((req.job_dir / "kernel_pid").read_text()))
            assert time.monotonic() - t0 < 40, updates
            time.sleep(0.1)
        elapsed = time.monotonic() - t0
        assert updates[-1].kind == "failed"
        assert updates[-1].message == "max_runtime exceeded (15 s)"
        assert 15 <= elapsed < 15 + LocalBackend.kill_grace + 5, elapsed
        assert not alive(runner)
        assert kernel, "the kernel should have started within 15 s"
        assert not alive(kernel)
        assert backend.running() == set()
    finally:
        kill_leftovers(runner, kernel)


def test_runner_dying_is_reported_and_close_stops_everything(tmp_path):
    backend = LocalBackend(node_name="n1", heartbeat_interval=0.3)
    nb = make_notebook(tmp_path / "w" / "wait.ipynb", "import time\ntime.sleep(300)")
    reqs = [request(tmp_path, job, nb) for job in ("crash", "other")]
    pids: list[int] = []
    try:
        for req in reqs:
            backend.launch(req)
        for req in reqs:
            pids += [wait_for_pid(req.job_dir / "pid"), wait_for_pid(req.job_dir / "kernel_pid")]
        crash_runner, crash_kernel, other_runner, other_kernel = pids
        os.killpg(crash_runner, signal.SIGKILL)  # the runner dies (OOM killer): its kernel is left
        updates = run_to_end(backend, {"crash"}, timeout=15)
        assert updates["crash"][-1].kind == "failed"
        assert updates["crash"][-1].message == "exit code -9"
        assert not alive(crash_kernel)  # poll stopped what the dead runner left behind
        assert backend.running() == {"other"} and alive(other_kernel)

        backend.close()
        assert backend.running() == set()
        assert not alive(other_runner) and not alive(other_kernel)
    finally:
        backend.close()
        kill_leftovers(*pids)


def _runner(job_dir: Path, nb: Path, *extra: str) -> subprocess.Popen:
    job_dir.mkdir(parents=True)
    return subprocess.Popen(
        [sys.executable, "-m", "jupyter_gpusched.backends.runner", "--notebook", str(nb), "--output",
         str(job_dir / "out.ipynb"), "--job-dir", str(job_dir), "--heartbeat-interval", "0.2", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_runner_stops_its_kernel_on_sigterm_and_at_its_own_max_runtime(tmp_path):
    """The runner alone (no backend watching): SIGTERM, and the max_runtime safety net."""
    nb = make_notebook(tmp_path / "r" / "wait.ipynb", "import time\ntime.sleep(300)")
    term = _runner(tmp_path / "term", nb)
    # 15 s: its kernel must be up (kernel_pid written) before the cap, and kernels start slowly on a loaded machine
    capped = _runner(tmp_path / "capped", nb, "--max-runtime", "15")
    kernels: list[int] = []
    try:
        kernels += [wait_for_pid(tmp_path / d / "kernel_pid") for d in ("term", "capped")]
        t0 = time.monotonic()
        term.send_signal(signal.SIGTERM)  # the runner only, not its group, not the kernel
        assert term.wait(timeout=10) == 128 + signal.SIGTERM
        assert time.monotonic() - t0 < 3
        assert not alive(kernels[0])
        assert (tmp_path / "term" / "error.txt").read_text().strip() == "terminated by signal SIGTERM"
        nbformat.read(str(tmp_path / "term" / "out.ipynb"), as_version=4)

        assert capped.wait(timeout=45) == 3
        assert not alive(kernels[1])
        assert (tmp_path / "capped" / "error.txt").read_text().strip() == "max_runtime exceeded (15 s)"
    finally:
        for p in (term, capped):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        kill_leftovers(*kernels)


# --- restarts -------------------------------------------------------------------------------
SERVER = """
import sys
from pathlib import Path
from jupyter_gpusched.backends import LaunchRequest, LocalBackend
nb, jobs = Path(sys.argv[1]), Path(sys.argv[2])
b = LocalBackend(heartbeat_interval=0.3)
for job in ("orphan", "orphan2"):
    b.launch(LaunchRequest(job, nb, nb.parent, {}, (0,), jobs / job, None))
# the "server" exits here without stopping its jobs, as a crashed or restarted server would
"""


def test_reap_orphan_left_by_a_previous_server(tmp_path):
    nb = make_notebook(tmp_path / "orph" / "orph.ipynb", "import time\ntime.sleep(300)")
    quick = make_notebook(tmp_path / "orph" / "quick.ipynb", "print('second attempt')")
    jobs = tmp_path / "jobs"
    subprocess.run([sys.executable, "-c", SERVER, str(nb), str(jobs)], check=True, timeout=30)
    pids: dict[str, int] = {}
    decoy = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        for job in ("orphan", "orphan2"):
            pids[job + " runner"] = wait_for_pid(jobs / job / "pid")
            pids[job + " kernel"] = wait_for_pid(jobs / job / "kernel_pid")
        assert all(alive(p) for p in pids.values()), pids  # the jobs outlived their server

        new = LocalBackend(node_name="n1", heartbeat_interval=0.3)
        try:
            assert new.running() == set()
            assert new.reap_orphan(tmp_path / "nothing-here") is False
            # a pid file naming a process that is not this job's runner: left alone
            decoy_dir = jobs / "decoy"
            decoy_dir.mkdir(parents=True)
            (decoy_dir / "pid").write_text(f"{decoy.pid}\n")
            (decoy_dir / "kernel_pid").write_text(f"{os.getpid()}\n")
            (decoy_dir / "launch.json").write_text(json.dumps({"pid": decoy.pid, "token": "0" * 32}))
            assert new.reap_orphan(decoy_dir) is False
            assert alive(decoy.pid)

            assert new.reap_orphan(jobs / "orphan") is True
            assert not alive(pids["orphan runner"]) and not alive(pids["orphan kernel"])
            assert new.reap_orphan(jobs / "orphan") is False  # nothing left
            assert alive(pids["orphan2 runner"])  # only that job's processes

            # relaunching a job whose earlier attempt still runs stops that attempt first
            new.launch(LaunchRequest("orphan2", quick, quick.parent, {}, (0,), jobs / "orphan2", None))
            assert not alive(pids["orphan2 runner"]) and not alive(pids["orphan2 kernel"])
            updates = run_to_end(new, {"orphan2"})
            assert [u.kind for u in updates["orphan2"]][-1] == "succeeded"
            assert "second attempt" in stream_text(nbformat.read(str(output_path(jobs / "orphan2")), as_version=4))
            assert new.poll() == []
        finally:
            new.close()
    finally:
        kill_leftovers(*pids.values())
        decoy.kill()
        decoy.wait()


# --- GPUs -----------------------------------------------------------------------------------
def _real_gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0


def test_inventory_matches_this_machine():
    b = LocalBackend(node_name="n1", virtual_gpus=3)
    try:
        gpus = _real_gpu_count()
        assert b.inventory() == [NodeSpec("n1", gpus or 3, pool="local", cpus=b.cpus, memory=b.memory)]
        used = b.gpu_memory_used_mib()
        assert set(used) == {("n1", i) for i in range(gpus)}
    finally:
        b.close()


@pytest.mark.parametrize("how", ["no pynvml module", "no NVML library"])
def test_inventory_without_nvml_gives_virtual_gpus(monkeypatch, how):
    if how == "no pynvml module":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    else:
        import pynvml

        def no_library():
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

        monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    b = LocalBackend(node_name="n1", virtual_gpus=3)
    assert b.inventory() == [NodeSpec("n1", 3, pool="local", cpus=b.cpus, memory=b.memory)]
    assert b.gpu_memory_used_mib() == {}
    b.close()


def test_inventory_and_memory_with_nvml(monkeypatch):
    """The NVML path, with a stand-in for the driver (this test machine has no GPU)."""
    from types import SimpleNamespace

    calls = []
    fake = SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=(h + 1) * 512 * 1024 * 1024),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    b = LocalBackend(node_name="n1", virtual_gpus=8)
    assert b.inventory() == [NodeSpec("n1", 2, pool="local", cpus=b.cpus, memory=b.memory)]
    assert b.gpu_memory_used_mib() == {("n1", 0): 512.0, ("n1", 1): 1024.0}
    b.close()
    assert calls == ["init", "shutdown"]
