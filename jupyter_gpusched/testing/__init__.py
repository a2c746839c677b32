"""Test support: real servers (Jupyter, JupyterHub, PostgreSQL, a kwok cluster) and waiters, as a pytest plugin."""
