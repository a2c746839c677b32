"""Sending notifications: signed webhooks, mail over SMTP, chat through apprise.

`Notifier.send(notification)` returns at once: the delivery runs on the notifier's own worker threads, with
bounded retries and exponential backoff, so a slow or dead receiver never delays a scheduling pass (nor
takes threads the kills need). Each outcome is queued; the owner collects them with `results()` on its
own thread (the service's tick does, see notify_jobs.py). Any part of the service may send: the job
notices, and later budget warnings, build a `Notification` and call `send`.

A webhook is a JSON POST of the notification's payload, signed: `X-GPUSched-Signature: sha256=<hex>` is the
HMAC-SHA256 of the exact body bytes under `c.GPUSched.webhook_secret`; `X-GPUSched-Timestamp` repeats the
body's `sent_at` (seconds), so a receiver can refuse old replays; `X-GPUSched-Delivery` is the same on every
retry of one delivery, so a receiver can drop the duplicates at-least-once delivery allows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import queue
import smtplib
import ssl
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import requests

from .notify_targets import Channels, Target

log = logging.getLogger("jupyter_gpusched")

SIGNATURE_HEADER = "X-GPUSched-Signature"
TIMESTAMP_HEADER = "X-GPUSched-Timestamp"
DELIVERY_HEADER = "X-GPUSched-Delivery"
EVENT_HEADER = "X-GPUSched-Event"
WORKERS = 4  # deliveries at once; more wait in line (a hung receiver holds one for timeout x attempts)


@dataclass(frozen=True)
class SmtpSettings:
    host: str = ""
    port: int = 587
    starttls: bool = True
    ssl: bool = False  # SMTPS (port 465) instead of STARTTLS
    username: str = ""
    password_env: str = ""  # the name of the environment variable that holds the password
    sender: str = ""  # the From address ("from" in the config)

    @classmethod
    def parse(cls, value: Mapping[str, Any]) -> SmtpSettings:
        """From c.GPUSched.smtp: {host, port, starttls, ssl, username, password_env, from}."""
        known = {"host", "port", "starttls", "ssl", "username", "password_env", "from"}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"c.GPUSched.smtp: unknown key {unknown[0]!r}; known: {', '.join(sorted(known))}")
        host = str(value.get("host", ""))
        sender = str(value.get("from", ""))
        if host and not sender:
            raise ValueError("c.GPUSched.smtp needs 'from' (the sender's address) beside 'host'")
        return cls(
            host=host,
            port=int(value.get("port", 587)),
            starttls=bool(value.get("starttls", True)),
            ssl=bool(value.get("ssl", False)),
            username=str(value.get("username", "")),
            password_env=str(value.get("password_env", "")),
            sender=sender,
        )


@dataclass(frozen=True)
class NotifySettings:
    webhook_secret: str = ""
    smtp: SmtpSettings = field(default_factory=SmtpSettings)
    attempts: int = 5  # tries per delivery, the first included
    backoff: float = 2.0  # seconds before the first retry; doubles each time
    max_backoff: float = 300.0
    timeout: float = 10.0  # seconds one try may take (connect + answer)
    # Defaults for jobs that carry no `notify` field: {"users": {name: targets}, "tenants": {name: targets}}
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def channels(self) -> Channels:
        try:
            import apprise  # noqa: F401
        except ImportError:
            has_apprise = False
        else:
            has_apprise = True
        return Channels(webhook=bool(self.webhook_secret), email=bool(self.smtp.host), apprise=has_apprise)

    def pause(self, failed_tries: int) -> float:
        return min(self.backoff * 2 ** (failed_tries - 1), self.max_backoff)


@dataclass(frozen=True)
class Notification:
    """One message to one target. `key` names the delivery (the same on every retry)."""

    target: Target
    event: str  # e.g. "succeeded", "started"; budgets may add their own
    subject: str
    payload: Mapping[str, Any]  # the webhook's JSON (plus "event", "delivery", "sent_at"); the mail's fields
    key: str
    job_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    notification: Notification
    delivered: bool
    tries: int
    error: str = ""


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: sha256=<hex HMAC-SHA256 of the body under the secret>."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_body(note: Notification, sent_at: float) -> bytes:
    return json.dumps(
        {**note.payload, "event": note.event, "delivery": note.key, "sent_at": int(sent_at)}, sort_keys=True
    ).encode()


def text_body(note: Notification) -> str:
    """The mail and chat text: the subject's facts, one per line."""
    lines = [note.subject, ""]
    lines += [f"{k}: {v}" for k, v in note.payload.items() if v not in (None, "", [], {})]
    return "\n".join(lines)


class Notifier:
    def __init__(self, settings: NotifySettings):
        self.settings = settings
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="gpusched-notify")
        self._outcomes: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._stopping = threading.Event()
        self._in_flight: set[str] = set()
        self._lock = threading.Lock()

    def send(self, note: Notification) -> bool:
        """Start delivering `note` in the background; False if that delivery is already under way."""
        with self._lock:
            if note.key in self._in_flight or self._stopping.is_set():
                return False
            self._in_flight.add(note.key)
        self._pool.submit(self._deliver, note)
        return True

    def results(self) -> list[Outcome]:
        """The outcomes since the last call (delivered, or given up after every try)."""
        out = []
        while True:
            try:
                out.append(self._outcomes.get_nowait())
            except queue.Empty:
                return out

    def close(self) -> None:
        """Stop: waiting retries end now, unrecorded deliveries are sent again after the next start."""
        self._stopping.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _deliver(self, note: Notification) -> None:
        error, tries = "", 0
        try:
            for tries in range(1, self.settings.attempts + 1):
                try:
                    self._send_once(note)
                except Exception as exc:  # any failure of the receiver is retried, then reported
                    error = str(exc)[:300] or type(exc).__name__
                    log.warning("notification %s to %s: try %d failed: %s", note.key, note.target.label, tries, error)
                else:
                    self._outcomes.put(Outcome(note, True, tries))
                    return
                if tries < self.settings.attempts and self._stopping.wait(self.settings.pause(tries)):
                    return  # stopping: not recorded, so sent again after the restart
            log.error("notification to %s failed after %d tries: %s", note.target.label, tries, error)
            self._outcomes.put(Outcome(note, False, tries, error))
        finally:
            with self._lock:
                self._in_flight.discard(note.key)

    def _send_once(self, note: Notification) -> None:
        channel = note.target.channel
        if channel == "webhook":
            self._post(note)
        elif channel == "email":
            self._mail(note)
        else:
            self._apprise(note)

    def _post(self, note: Notification) -> None:
        sent_at = time.time()
        body = webhook_body(note, sent_at)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "jupyter-gpusched",
            SIGNATURE_HEADER: sign(self.settings.webhook_secret, body),
            TIMESTAMP_HEADER: str(int(sent_at)),
            DELIVERY_HEADER: note.key,
            EVENT_HEADER: note.event,
        }
        # no redirects: a signed body goes only where the user pointed it
        answer = requests.post(
            note.target.address, data=body, headers=headers, timeout=self.settings.timeout, allow_redirects=False
        )
        if not 200 <= answer.status_code < 300:
            raise RuntimeError(f"HTTP {answer.status_code}")

    def _mail(self, note: Notification) -> None:
        smtp = self.settings.smtp
        message = EmailMessage()
        message["Subject"] = note.subject
        message["From"] = smtp.sender
        message["To"] = note.target.address
        message["X-GPUSched-Delivery"] = note.key
        message.set_content(text_body(note))
        timeout = self.settings.timeout
        if smtp.ssl:
            server: smtplib.SMTP = smtplib.SMTP_SSL(smtp.host, smtp.port, timeout=timeout)
        else:
            server = smtplib.SMTP(smtp.host, smtp.port, timeout=timeout)
        with server:
            if smtp.starttls and not smtp.ssl:
                server.starttls(context=ssl.create_default_context())
            if smtp.username:
                server.login(smtp.username, os.environ.get(smtp.password_env, "") if smtp.password_env else "")
            server.send_message(message)

    def _apprise(self, note: Notification) -> None:
        import apprise

        sender = apprise.Apprise()
        sender.add(note.target.address)
        if not sender.notify(title=note.subject, body=text_body(note)):
            raise RuntimeError("apprise could not deliver it (see the server log)")
