"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on, from the project's pytest plugin
(jupyter_gpusched/testing/plugin.py); the helpers are in jupyter_gpusched/testing/."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_gpusched.store import default_url

# pytest-jupyter's first: the project's plugin overrides its jp_server_config.
pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_gpusched.testing.plugin"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A store's URL on SQLite, then on a real PostgreSQL server (skipped, saying why, where it is not installed)."""
    if request.param == "sqlite":
        return default_url(tmp_path)
    return request.getfixturevalue("pg").create_database()
