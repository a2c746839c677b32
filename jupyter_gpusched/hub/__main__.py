"""`python -m jupyter_gpusched.hub`: run the scheduler as a JupyterHub service."""

from .app import main

main()
