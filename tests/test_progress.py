"""A job's progress counts the notebook's own cells: papermill's injected parameters cell is not one, and a
cell that failed is not done (issue 18: "cells 3/3" for a 2-cell notebook)."""

from __future__ import annotations

import pytest

from jupyter_gpusched.backends import LaunchRequest, LocalBackend
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import run_to_end

pytestmark = pytest.mark.timeout(240)


def last_progress(updates: list) -> tuple[int, int] | None:
    return [u.progress for u in updates if u.progress is not None][-1]


def test_progress_counts_the_notebooks_own_cells(tmp_path):
    ok = make_notebook(tmp_path / "ok.ipynb", "y = x * 2", "print(y)", parameters="x = 1")
    bad = make_notebook(tmp_path / "bad.ipynb", "y = x * 2", "1 / 0", parameters="x = 1")
    backend = LocalBackend(virtual_gpus=2)
    try:
        for job_id, nb in (("ok", ok), ("bad", bad)):
            backend.launch(LaunchRequest(job_id, nb, tmp_path, {"x": 5}, (0,), tmp_path / job_id, None))
        updates = run_to_end(backend, {"ok", "bad"}, 180)
    finally:
        backend.close()
    # three code cells each (parameters, two of the user's): the two that are the user's count
    assert last_progress(updates["ok"]) == (3, 3)
    assert last_progress(updates["bad"]) == (2, 3)
