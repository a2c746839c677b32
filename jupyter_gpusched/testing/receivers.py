"""Real notification receivers on loopback: an HTTP server that records webhook calls, and an SMTP server."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .net import free_port


@dataclass
class Call:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signed_by(self, secret: str) -> bool:
        """Does X-GPUSched-Signature hold the HMAC-SHA256 of the body under `secret` (as docs/notifications.md
        tells receivers to check it)?"""
        expected = "sha256=" + hmac.new(secret.encode(), self.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(expected, self.headers.get("x-gpusched-signature", ""))


@dataclass
class Receiver:
    """Records every POST. Per path: `fail[path]` answers 500 that many times first; a path under
    `hang` holds the request until `release` is set."""

    port: int = 0
    calls: list[Call] = field(default_factory=list)
    fail: dict[str, int] = field(default_factory=dict)
    hang: set[str] = field(default_factory=set)
    release: threading.Event = field(default_factory=threading.Event)
    hanging: int = 0  # requests held right now

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def to(self, path: str, status: int | None = None) -> list[Call]:
        return [c for c in self.calls if c.path == path and (status is None or c.status == status)]

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path
                if path in receiver.hang:
                    receiver.hanging += 1
                    receiver.release.wait(120)
                    receiver.hanging -= 1
                status = 200
                if receiver.fail.get(path, 0) > 0:
                    receiver.fail[path] -= 1
                    status = 500
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.calls.append(Call(path, headers, body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port or free_port()), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


class MailBox:
    """A real SMTP server (aiosmtpd) on loopback that keeps every message it is given."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.port = free_port()

    def start(self) -> MailBox:
        from aiosmtpd.controller import Controller

        box = self

        class Keep:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's hook name
                message = message_from_bytes(envelope.content)
                message["X-Rcpt-To"] = ", ".join(envelope.rcpt_tos)
                box.messages.append(message)
                return "250 OK"

        self._controller = Controller(Keep(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        self._controller.stop()
