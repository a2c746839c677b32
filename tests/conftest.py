"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on, from the project's pytest plugin
(jupyter_gpusched/testing/plugin.py); the helpers are in jupyter_gpusched/testing/."""

from __future__ import annotations

from pathlib import Path

# pytest-jupyter's first: the project's plugin overrides its jp_server_config.
pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_gpusched.testing.plugin"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"
