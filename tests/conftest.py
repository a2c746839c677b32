"""Shared fixtures: a real Jupyter server (pytest-jupyter) with the extension on, from the project's pytest plugin
(jupyter_gpusched/testing/plugin.py); the helpers are in jupyter_gpusched/testing/."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jupyter_gpusched.core.forecast.series import Series
from jupyter_gpusched.store import default_url

# pytest-jupyter's first: the project's plugin overrides its jp_server_config.
pytest_plugins = ["pytest_jupyter.jupyter_server", "jupyter_gpusched.testing.plugin"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"


def working_day(days: int, seed: int = 0) -> Series:
    """10-minute job arrivals that follow the clock: about 4 a bucket at night, 24 at midday, Poisson noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(144 * days)
    level = 14.0 - 10.0 * np.cos(2 * np.pi * (t % 144) / 144)
    return Series(0.0, 600.0, rng.poisson(level).astype(float))


def level_steps(days: int, seed: int = 0) -> Series:
    """10-minute GPU demand in long steps (jobs of hours to days starting and ending), no daily shape."""
    rng = np.random.default_rng(seed)
    jumps = np.where(rng.random(144 * days) < 0.02, rng.normal(0, 8, 144 * days), 0.0)
    return Series(0.0, 600.0, np.maximum(40 + np.cumsum(jumps), 0.0))


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """A store's URL on SQLite, then on a real PostgreSQL server (skipped, saying why, where it is not installed)."""
    if request.param == "sqlite":
        return default_url(tmp_path)
    return request.getfixturevalue("pg").create_database()
