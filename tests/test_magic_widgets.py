"""The %gpusched magics in a real kernel (nbclient) and the ipywidgets, against a real server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import nbformat
import pytest
from ipywidgets.embed import embed_data
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from jupyter_gpusched.client import Client
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.widgets import ForecastChart, PipelineForm, QueueView, ScheduleView, SubmitForm

pytestmark = pytest.mark.timeout(240)


def outputs_text(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(str(out.data.get("text/plain", "")))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    return "".join(parts)


def test_magics_in_a_real_kernel(live_server, monkeypatch):
    root = live_server.root
    make_notebook(root / "quick.ipynb", "print('quick ran with n =', n)", parameters="n = 0")
    nb = nbformat.v4.new_notebook()
    sources = [
        "%load_ext jupyter_gpusched",
        "%gpusched submit quick.ipynb --gpus 1 --priority high -p n=5",
        "%gpusched list",
        "%%gpusched --gpus 1\nimport os\nprint('hello from a GPU job', 6 * 7, 'on', repr(os.environ['CUDA_VISIBLE_DEVICES']))",
        "%gpusched status no-such-job",
        "%gpusched submit missing.ipynb",
        "%gpusched submit quick.ipynb --gpus lots",
        "%gpusched queues",
        "%gpusched forecast",
    ]
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    # The kernel finds the server as a user's would: through the Jupyter runtime directory.
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    out = [outputs_text(c) for c in nb.cells]
    assert out[1].startswith("submitted ") and "position" in out[1] or "QUEUED" in out[1], out[1]
    assert "quick.ipynb" in out[2] and "ID" in out[2]
    assert "hello from a GPU job 42 on '" in out[3], out[3]
    for bad in (out[4], out[5], out[6]):
        assert "Traceback" not in bad and len(bad.strip().splitlines()) <= 3, bad
    assert out[4].strip() == "gpusched: no job 'no-such-job' (field: id)"
    assert out[5].strip().startswith("gpusched: no notebook at 'missing.ipynb'")
    assert "invalid int value: 'lots'" in out[6]
    assert "TENANT" in out[7] and "default" in out[7]
    assert "GPU demand" in out[8] and "Forecast of GPUs requested" in out[8], out[8]
    assert len(out[8].splitlines()) < 20 and '"values"' not in out[8]  # a summary, not the raw JSON
    assert all(c.get("outputs") is not None for c in nb.cells)
    assert not any(o.output_type == "error" for c in nb.cells for o in c.get("outputs", []))


def test_magic_speaks_the_apis_fields_and_names_its_commands(live_server, monkeypatch):
    root = live_server.root
    make_notebook(root / "echo.ipynb", "print('echo ran')", parameters="lr = 0.1")
    sources = [
        "%load_ext jupyter_gpusched",
        "%gpusched frobnicate",
        "%gpusched",
        "%gpusched manifest echo.ipynb",
        "%gpusched submit echo.ipynb -p 2x=1",
        "%gpusched submit echo.ipynb -p 'unclosed",
        "%gpusched submit echo.ipynb --json --max-retries 0 --gpu-type virtual --priority low"
        " -p lr=1e-3 -p day=2024-01-01 -p x=None -p sizes=[1,2]",
        "%%gpusched --max-retries 1 --no-wait -p n=3\nprint(n)",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    out = [outputs_text(c).strip() for c in nb.cells]
    known = "submit, list, status, cancel, logs, output, queues, cluster, forecast, pipeline, schedule"
    assert out[1] == f"%gpusched: unknown command 'frobnicate'; known commands: {known}"
    assert out[2] == f"%gpusched: name a command: {known} (%gpusched --help)"
    assert out[3] == "%gpusched: manifest runs from a terminal: jupyter gpusched manifest --help"
    assert (
        out[4]
        == "%gpusched submit: error: argument -p/--param: parameter name '2x' is not a valid Python identifier (in '2x=1')"
    )
    assert out[5] == "%gpusched: error: No closing quotation"
    job = json.loads(out[6])
    assert job["parameters"] == {"lr": 0.001, "day": "2024-01-01", "x": None, "sizes": [1, 2]}
    assert (job["max_retries"], job["gpu_type"], job["priority"]) == (0, "virtual", "low")
    assert out[7].startswith("submitted ") and "(1 GPU, normal)" in out[7], out[7]
    cell_job = Client(live_server.url, live_server.token).get(out[7].split()[1])
    assert cell_job["max_retries"] == 1 and cell_job["parameters"] == {"n": 3}
    assert not any(o.output_type == "error" for c in nb.cells for o in c.get("outputs", []))


def test_widgets_build_their_state_without_a_browser(live_server):
    make_notebook(live_server.root / "w.ipynb", "import time; time.sleep(1)")
    client = Client(live_server.url, live_server.token, root_dir=str(live_server.root))
    form = SubmitForm(str(live_server.root / "w.ipynb"), client=client)
    form.gpus.value = 99
    assert form.submit() is None
    assert "GPUs" in form.status.value and "cluster has 2" in form.status.value  # the server's own message
    form.gpus.value = 1
    form.parameters.value = "x=1\n# comment\nname=abc"
    job = form.submit()
    assert job is not None and job["parameters"] == {"x": 1, "name": "abc"}
    assert job["id"] in form.status.value

    view = QueueView(client=client, refresh=0)
    assert job["id"] in view.table.value and "GPUs free" in view.summary.value
    state = embed_data(views=[view])["manager_state"]["state"]
    assert any(job["id"] in str(m["state"].get("value", "")) for m in state.values())

    deadline = time.monotonic() + 60
    while client.get(job["id"])["state"] != "SUCCEEDED":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    time.sleep(0.5)
    chart = ForecastChart(client=client, minutes=60)
    assert chart.plot.png[:8] == b"\x89PNG\r\n\x1a\n"
    assert 'alt="Chart: GPU demand per tenant, last 60 min' in chart.plot.value
    assert chart.usage["tenants"]["default"]["requested"]
    assert "Demand history" in chart.note.value
    view.close()


def test_the_submit_widget_takes_after_and_notify_and_the_pipeline_widget_runs_a_file(live_server):
    """Issue 14's fields in the widgets: a job that runs after another, with its own notify targets (a bad
    one refused at its field), and a pipeline file run from a widget, its steps listed with their states."""
    root = live_server.root
    make_notebook(root / "a.ipynb", "x = 1")
    make_notebook(root / "b.ipynb", "y = 2")
    client = Client(live_server.url, live_server.token, root_dir=str(root))
    first = SubmitForm(str(root / "a.ipynb"), client=client).submit()
    assert first is not None
    form = SubmitForm(str(root / "b.ipynb"), client=client)
    form.after.value = first["id"]
    form.notify.value = "ftp://nowhere"
    assert form.submit() is None and "notify" in form.status.value.lower()
    form.notify.value = "none"
    job = form.submit()
    assert job is not None and job["after"] == [first["id"]] and job["notify"] == []

    (root / "flow.yaml").write_text("steps:\n  - notebook: a.ipynb\n  - notebook: b.ipynb\nedges: [[0, 1]]\n")
    pipe = PipelineForm(str(root / "missing.yaml"), client=client)
    assert pipe.run() is None and "missing.yaml" in pipe.status.value
    pipe.path.value = str(root / "flow.yaml")
    made = pipe.run()
    assert made is not None and made["id"] in pipe.status.value
    assert "a.ipynb" in pipe.steps.value and "b.ipynb" in pipe.steps.value
    assert "WAITING" in pipe.steps.value  # the second step waits for the first
    deadline = time.monotonic() + 120
    while client.pipeline(made["id"])["state"] != "SUCCEEDED":
        assert time.monotonic() < deadline, client.pipeline(made["id"])
        time.sleep(0.5)
    pipe.refresh_button.click()
    assert "SUCCEEDED" in pipe.steps.value and "WAITING" not in pipe.steps.value


def test_the_schedule_widget_lists_mine_and_pauses_and_resumes(live_server):
    make_notebook(live_server.root / "nightly.ipynb", "x = 1")
    client = Client(live_server.url, live_server.token, root_dir=str(live_server.root))
    made = client.add_schedule(str(live_server.root / "nightly.ipynb"), "0 2 * * *", "Europe/Berlin")
    view = ScheduleView(client=client)
    try:
        (row,) = [r for r in view.rows.children if made["id"] in r.children[0].value]
        label, button = row.children
        assert "nightly.ipynb" in label.value and "0 2 * * *" in label.value and "Europe/Berlin" in label.value
        assert button.description == "Pause"
        button.click()  # as a user's click: the server's schedule is paused and the row says so
        assert client.schedule(made["id"])["paused"] is True
        (row,) = [r for r in view.rows.children if made["id"] in r.children[0].value]
        assert "paused" in row.children[0].value and row.children[1].description == "Resume"
        row.children[1].click()
        assert client.schedule(made["id"])["paused"] is False
        state = embed_data(views=[view])["manager_state"]["state"]
        assert any(made["id"] in str(m["state"].get("value", "")) for m in state.values())
    finally:
        client.delete_schedule(made["id"])


def test_a_failing_gpusched_cell_fails_and_leaves_no_notebook_behind(live_server, monkeypatch):
    """Run All stops at a %%gpusched cell whose job failed (one line, no traceback), unless --no-raise;
    the cell's notebook is named after the notebook and cell, and removed once its job has ended."""
    root = live_server.root
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src)
        for src in (
            "%load_ext jupyter_gpusched",
            "%%gpusched --no-raise\nraise ValueError('tolerated')",
            "%%gpusched\nraise ValueError('boom')",
            "print('never runs')",
        )
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    before = {j["id"] for j in Client(live_server.url, live_server.token).jobs()}
    client = NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}})
    with pytest.raises(CellExecutionError) as failed:
        client.execute()
    assert "JobFailed: gpusched: job " in str(failed.value) and "FAILED: ValueError: boom" in str(failed.value)
    assert "tolerated" in outputs_text(nb.cells[1]) and not any(o.output_type == "error" for o in nb.cells[1].outputs)
    (error,) = [o for o in nb.cells[2].outputs if o.output_type == "error"]
    assert error.traceback == [f"JobFailed: {error.evalue}"]  # one line, not a traceback
    assert not nb.cells[3].get("outputs")
    jobs = [j for j in Client(live_server.url, live_server.token).jobs() if j["id"] not in before]
    assert sorted(j["notebook"].rsplit("/", 1)[-1] for j in jobs) == ["notebook.cell-2.ipynb", "notebook.cell-3.ipynb"]
    assert not any((root / ".gpusched-cells" / f"notebook.cell-{n}.ipynb").exists() for n in (2, 3))


def test_a_local_servers_root_is_known_with_or_without_url(live_server, monkeypatch):
    """One rule for notebook paths: relative to the current folder whenever the server runs on this machine,
    also when it is named with --url (its runtime file gives its root)."""
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_ROOT_DIR", raising=False)
    named = Client(live_server.url.replace("127.0.0.1", "localhost"), live_server.token)
    assert Path(named.root_dir or "").resolve() == live_server.root.resolve()
    (live_server.root / "sub").mkdir(exist_ok=True)
    monkeypatch.chdir(live_server.root / "sub")
    assert named.server_path("a.ipynb") == "sub/a.ipynb"
