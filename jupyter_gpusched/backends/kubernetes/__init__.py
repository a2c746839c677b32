"""The Kubernetes backend (a package: one concern per module)."""

from .backend import *  # noqa: F401,F403
from .backend import _Relist, _Watcher  # noqa: F401
