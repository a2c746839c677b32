"""jupyter-gpusched: queue notebooks as GPU jobs from Jupyter, scheduled fairly."""

__version__ = "0.1.0"


def _jupyter_server_extension_points():
    from .server.app import GPUSched

    return [{"module": "jupyter_gpusched", "app": GPUSched}]
