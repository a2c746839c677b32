"""Test support: real servers (Jupyter, JupyterHub, PostgreSQL, a kwok cluster) and waiters, as a pytest plugin.

`tests/conftest.py` loads `jupyter_gpusched.testing.plugin` (the fixtures); test files import the helpers
from the modules here. Only tests/ and benchmarks/ import this package, never the scheduler itself.

- `net`: free ports.                        - `waits`: poll until something holds (one `wait_for`).
- `notebooks`: small real notebooks.        - `jupyter`: a real `jupyter server` / `jupyter lab` process.
- `service`: the live service on a folder.  - `postgres`, `hub`: a private PostgreSQL, a real JupyterHub.
- `kwok`: fake GPU nodes and the local Kubernetes control plane. - `kueue`: a real Kueue manager on it.
"""


class Unavailable(RuntimeError):
    """A server binary this helper needs is not installed (the message says which and how to get it)."""
