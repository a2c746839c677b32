"""The hands-on lab: every walkthrough notebook runs top to bottom in a real kernel
(nbclient) against a real server, so none rots."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import PROJECT_ROOT

pytestmark = pytest.mark.timeout(300)

NOTEBOOKS = sorted(p.name for p in (PROJECT_ROOT / "notebooks").glob("0*.ipynb"))


def test_there_are_six_walkthroughs():
    assert len(NOTEBOOKS) == 6, NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_walkthrough_runs_top_to_bottom(name, live_server, monkeypatch):
    work = live_server.root / "notebooks"
    work.mkdir(exist_ok=True)
    shutil.copy(PROJECT_ROOT / "notebooks" / name, work / name)
    nb = nbformat.read(work / name, as_version=4)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))  # the kernel finds the server as a user's would
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    NotebookClient(nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    text = "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.output_type == "stream"
    )
    assert "Traceback" not in text and "gpusched: " not in text.replace("gpusched: job", ""), text[-3000:]
