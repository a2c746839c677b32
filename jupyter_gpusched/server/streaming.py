"""Files sent in chunks: a job's log and its executed notebook, with HTTP `Range` requests.

A 200 MB log read whole raised the server's memory by 200 MB per reader; here a response holds one
chunk at a time and waits for the client to take it (`flush`) before reading the next.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from tornado import web
from tornado.iostream import StreamClosedError

from .validation import ApiError

CHUNK = 64 * 1024  # bytes read and sent at a time
_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class Unsatisfiable(Exception):
    """A `Range` that selects nothing of the file (416)."""


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The (start, length) a `Range: bytes=...` header asks for in a file of `size` bytes; None when
    there is no header or one we do not serve (several ranges, another unit, bad syntax: RFC 9110 lets
    a server ignore those and send the whole file). Raises Unsatisfiable when it selects nothing."""
    if not header:
        return None
    m = _RANGE.match(header)
    if m is None:
        return None
    first, last = m.group(1), m.group(2)
    if not first and not last:
        return None
    if not first:  # bytes=-N: the last N bytes
        n = _number(last)
        if n == 0 or size == 0:
            raise Unsatisfiable
        return max(0, size - n), min(n, size)
    start = _number(first)
    if last and _number(last) < start:
        return None  # invalid: ignored
    if start >= size:
        raise Unsatisfiable
    end = min(_number(last), size - 1) if last else size - 1
    return start, end - start + 1


def _number(digits: str) -> int:
    # Past 19 digits a number is beyond any file (and int() refuses over 4,300 digits).
    return int(digits) if len(digits) <= 19 else 2**63


def file_size(path: Path) -> int | None:
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def start_range(handler: web.RequestHandler, path: Path, size: int) -> tuple[int, int] | None:
    """Apply the request's `Range` header: on a satisfiable one set 206 and Content-Range and return
    (start, length); None when the whole file is to be sent. Raises ApiError(416) when it selects nothing."""
    handler.set_header("Accept-Ranges", "bytes")
    try:
        wanted = parse_range(handler.request.headers.get("Range"), size)
    except Unsatisfiable:
        handler.set_header("Content-Range", f"bytes */{size}")
        raise ApiError(
            416, "range_not_satisfiable", f"the range selects nothing of the file ({size} bytes)", "Range"
        ) from None
    if wanted is not None:
        start, length = wanted
        handler.set_status(206)
        handler.set_header("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
    return wanted


async def send_file(handler: web.RequestHandler, path: Path, start: int, length: int, content_type: str) -> None:
    """Send `length` bytes of `path` from byte `start`, CHUNK at a time, and finish the response.
    (No Content-Length: a file that shrinks meanwhile ends the body early instead of breaking it.)"""
    handler.set_header("Content-Type", content_type)
    remaining = length
    try:
        f = open(path, "rb")
    except OSError:
        f = None
    if f is not None:
        with f:
            f.seek(start)
            while remaining > 0:
                chunk = f.read(min(CHUNK, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                handler.write(chunk)
                try:
                    await handler.flush()  # wait for the client before reading more: one chunk in memory
                except StreamClosedError:
                    return  # the client went away
    handler.finish(set_content_type=content_type)  # type: ignore[call-arg]  # APIHandler.finish takes it
