"""Pipelines from the terminal and the notebook: `jupyter gpusched submit --after`, `pipeline run FILE`,
`pipeline show ID`, and `%gpusched pipeline FILE` in a real kernel, against a real server."""

from __future__ import annotations

import io
import json

import nbformat
import pytest
from nbclient import NotebookClient

from jupyter_gpusched import cli
from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(240)


def _run(live_server, *argv: str) -> tuple[int, str]:
    out = io.StringIO()
    args = cli.build_parser().parse_args(["--url", live_server.url, "--token", live_server.token, *argv])
    return cli.run(args, out=out), out.getvalue()


def test_cli_submit_after_and_pipeline_run_and_show(live_server, tmp_path, monkeypatch):
    root = live_server.root
    make_notebook(root / "p_first.ipynb", "print('first')")
    make_notebook(root / "p_second.ipynb", "print('second')")
    monkeypatch.chdir(root)
    code, text = _run(live_server, "submit", "p_first.ipynb", "--json")
    first = json.loads(text)
    code, text = _run(live_server, "submit", "p_second.ipynb", "--after", first["id"], "--when", "ended", "--json")
    second = json.loads(text)
    assert code == 0 and second["state"] == "WAITING" and second["after"] == [first["id"]] and second["when"] == "ended"

    (root / "flows").mkdir(exist_ok=True)
    (root / "flows" / "flow.yaml").write_text(
        "steps:\n  - notebook: ../p_first.ipynb\n  - notebook: ../p_second.ipynb\n    priority: high\nedges: [[0, 1]]\n"
    )
    code, text = _run(live_server, "pipeline", "run", "flows/flow.yaml", "--wait")
    assert code == 0, text
    assert text.startswith("pipeline ") and ": SUCCEEDED" in text.splitlines()[0]
    assert "p_second.ipynb" in text and "edges: 0->1" in text
    pipeline_id = text.split()[1].rstrip(":")
    code, text = _run(live_server, "pipeline", "show", pipeline_id, "--json")
    shown = json.loads(text)
    assert [s["state"] for s in shown["steps"]] == ["SUCCEEDED", "SUCCEEDED"] and shown["edges"] == [[0, 1]]

    (root / "cycle.yaml").write_text(
        "steps: [{notebook: p_first.ipynb}, {notebook: p_first.ipynb}]\nedges: [[0, 1], [1, 0]]\n"
    )
    with pytest.raises(cli.GPUSchedError, match="cycle"):
        _run(live_server, "pipeline", "run", "cycle.yaml")


def test_magic_runs_a_pipeline_file(live_server, monkeypatch):
    root = live_server.root
    make_notebook(root / "m_a.ipynb", "print('a')")
    make_notebook(root / "m_b.ipynb", "print('b')")
    (root / "magic_flow.json").write_text(
        json.dumps({"steps": [{"notebook": "m_a.ipynb"}, {"notebook": "m_b.ipynb"}], "edges": [[0, 1]]})
    )
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(src)
        for src in ("%load_ext jupyter_gpusched", "%gpusched pipeline magic_flow.json", "%gpusched pipeline show nope")
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    texts = ["".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells]
    assert texts[1].startswith("pipeline ") and "m_a.ipynb" in texts[1] and "WAITING" in texts[1], texts[1]
    assert texts[2].strip() == "gpusched: no pipeline 'nope' (field: id)", texts[2]
