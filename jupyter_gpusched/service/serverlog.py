"""The package's own log lines in the Jupyter server's log.

Modules log to `jupyter_gpusched.*` loggers. Under a Jupyter server nothing handles those (the
server configures only its applications' loggers), so Python's last-resort handler printed
warnings and errors bare and dropped everything below WARNING, e.g. "recovered 3 jobs". The
service hands them on to the log of the application its backend was configured under (the
server extension's), which formats them like the server's own lines and applies its level.
"""

from __future__ import annotations

import logging
from typing import Any

PACKAGE_LOGGER = "jupyter_gpusched"


class _HandOn(logging.Handler):
    """Hands each record to another logger (its handlers and filters), keeping the record's name."""

    def __init__(self, target: logging.Logger):
        super().__init__()
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= self.target.getEffectiveLevel():
            self.target.handle(record)


def log_into(target: Any) -> None:
    """Send the package's records to `target` (a Logger with handlers, e.g. the extension app's `log`),
    at its level; replaces an earlier call's target. Anything else (no logger, no handlers): no change."""
    if not isinstance(target, logging.Logger) or target.name.startswith(PACKAGE_LOGGER):
        return
    if not target.handlers and not target.hasHandlers():
        return
    package = logging.getLogger(PACKAGE_LOGGER)
    for handler in [h for h in package.handlers if isinstance(h, _HandOn)]:
        package.removeHandler(handler)
    package.addHandler(_HandOn(target))
    package.setLevel(min(target.getEffectiveLevel(), logging.INFO))
