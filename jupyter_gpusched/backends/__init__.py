"""Where jobs run. One protocol (`base.Backend`); `local.LocalBackend` is the embedded default."""

from .base import Backend, BackendError, BackendUpdate, LaunchRequest, log_path, output_path
from .local import LocalBackend

__all__ = ["Backend", "BackendError", "BackendUpdate", "LaunchRequest", "LocalBackend", "log_path", "output_path"]
