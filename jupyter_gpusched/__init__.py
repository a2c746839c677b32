"""jupyter-gpusched: queue notebooks as GPU jobs from Jupyter, scheduled fairly."""

__version__ = "0.1.0"


def _jupyter_server_extension_points():
    # the generic extension (server.app.GPUSched) with JupyterHub's two modes (hub service, forwarding)
    from .hub.extension import HubAwareGPUSched

    return [{"module": "jupyter_gpusched", "app": HubAwareGPUSched}]


def load_ipython_extension(ipython):
    """`%load_ext jupyter_gpusched` registers the %gpusched magics."""
    from .magic import load_ipython_extension as load

    load(ipython)


def _jupyter_labextension_paths():
    """The prebuilt JupyterLab extension (built from labextension/ into jupyter_gpusched/labextension)."""
    return [{"src": "labextension", "dest": "jupyter-gpusched"}]
