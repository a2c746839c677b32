"""Where word of a job goes: the `notify` field of a job, of a schedule, of a user's defaults.

A target is one channel and the events it wants. Accepted shapes (docs/notifications.md):
  {"webhook": "https://..."}, {"email": "a@b.org"}, {"apprise": "slack://..."}, each with an optional
  "events": [...]; or a string: "http(s)://..." (webhook), "mailto:a@b.org" or "a@b.org" (email), any other
  "scheme://..." (an apprise URL). Bad input raises SpecError("notify", ...), which the API answers with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from ..core.scheduler import SpecError

FIELD = "notify"
EVENTS = ("started", "succeeded", "failed", "cancelled")
DEFAULT_EVENTS = ("succeeded", "failed", "cancelled")  # the terminal states
CHANNELS = ("webhook", "email", "apprise")
MAX_TARGETS = 10
MAX_URL_CHARS = 2048
MAX_EMAIL_CHARS = 254  # RFC 5321's path limit
_EMAIL = re.compile(r"^[^@\s<>(),;:\"\[\]]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?\.[A-Za-z]{2,}$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


@dataclass(frozen=True)
class Target:
    channel: str  # webhook | email | apprise
    address: str  # the URL or the mail address
    events: tuple[str, ...] = DEFAULT_EVENTS

    def to_dict(self) -> dict[str, Any]:
        return {self.channel: self.address, "events": list(self.events)}

    def public(self) -> dict[str, Any]:
        """As the API shows it: an apprise URL carries its service's token, so only its scheme is shown."""
        shown = self.address.split("://", 1)[0] + "://…" if self.channel == "apprise" else self.address
        return {self.channel: shown, "events": list(self.events)}

    @property
    def label(self) -> str:
        """Names it in the job's events and the server log (no tokens)."""
        if self.channel == "apprise":
            return "apprise " + self.address.split("://", 1)[0] + "://"
        if self.channel == "webhook":
            parts = urlsplit(self.address)
            return f"webhook {parts.scheme}://{parts.hostname}{':' + str(parts.port) if parts.port else ''}"
        return f"email {self.address}"


@dataclass(frozen=True)
class Channels:
    """Which channels this server can use: a webhook needs the shared secret, an email the SMTP host."""

    webhook: bool = True
    email: bool = True
    apprise: bool = True


def _fail(message: str) -> SpecError:
    return SpecError(FIELD, message)


def _clean(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(f"a {what} must be a non-empty string, not {type(value).__name__} {str(value)[:60]!r}")
    value = value.strip()
    if len(value) > limit:
        raise _fail(f"a {what} is {len(value)} characters; the limit is {limit}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _fail(f"a {what} must not contain control characters")
    return value


def _webhook(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise _fail(f"a webhook must be an http:// or https:// URL, not {url[:80]!r}")
    if not parts.hostname:
        raise _fail(f"the webhook URL {url[:80]!r} names no host")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError:
        raise _fail(f"the webhook URL {url[:80]!r} has a bad port") from None
    return url


def _email(address: str) -> str:
    if address.lower().startswith("mailto:"):
        address = address[len("mailto:") :]
    if len(address) > MAX_EMAIL_CHARS or not _EMAIL.match(address):
        raise _fail(f"{address[:80]!r} is not a mail address like name@example.org")
    return address


def _apprise(url: str) -> str:
    if not _SCHEME.match(url):
        raise _fail(f"{url[:80]!r} is not an apprise URL (scheme://...; see https://github.com/caronc/apprise/wiki)")
    try:
        import apprise
    except ImportError:
        raise _fail("chat notifications need apprise on the server: pip install 'jupyter-gpusched[notify]'") from None
    if not apprise.Apprise().add(url):
        scheme = url.split("://", 1)[0]
        raise _fail(f"apprise does not understand this {scheme}:// URL (a supported service? its token complete?)")
    return url


def _events(value: Any) -> tuple[str, ...]:
    if value is None:
        return DEFAULT_EVENTS
    if not isinstance(value, list) or not value:
        raise _fail(f"events must be a non-empty list of: {', '.join(EVENTS)}")
    for event in value:
        if event not in EVENTS:
            raise _fail(f"unknown event {str(event)[:40]!r}; use any of: {', '.join(EVENTS)}")
    return tuple(e for e in EVENTS if e in value)  # in lifecycle order, each once


def parse_target(value: Any, channels: Channels = Channels()) -> Target:
    if isinstance(value, str):
        text = _clean(value, "notify target", MAX_URL_CHARS)
        low = text.lower()
        if low.startswith(("http://", "https://")):
            value = {"webhook": text}
        elif low.startswith("mailto:") or (not _SCHEME.match(text) and "@" in text):
            value = {"email": text}
        elif _SCHEME.match(text):
            value = {"apprise": text}
        else:
            raise _fail(f"{text[:80]!r} is no notify target: give an http(s) URL, mailto:address or an apprise URL")
    if not isinstance(value, Mapping):
        raise _fail(f"a notify target is an object or a string, not {type(value).__name__}")
    named = [c for c in CHANNELS if c in value]
    unknown = sorted(set(value) - set(CHANNELS) - {"events"})
    if unknown or len(named) != 1:
        raise _fail(
            f"a notify target has exactly one of {', '.join(CHANNELS)}, and optionally events"
            + (f"; unknown key {unknown[0]!r}" if unknown else "")
        )
    channel = named[0]
    if not getattr(channels, channel):
        why = {
            "webhook": "c.GPUSched.webhook_secret (webhooks are signed)",
            "email": "c.GPUSched.smtp (the mail server)",
            "apprise": "apprise",
        }
        raise _fail(f"{channel} notifications are not set up on this server: it needs {why[channel]}")
    raw = _clean(value[channel], f"{channel} address", MAX_EMAIL_CHARS if channel == "email" else MAX_URL_CHARS)
    address = {"webhook": _webhook, "email": _email, "apprise": _apprise}[channel](raw)
    return Target(channel, address, _events(value.get("events")))


def parse_targets(value: Any, channels: Channels = Channels()) -> tuple[Target, ...]:
    """The `notify` field: a list of targets (or one target). Raises SpecError("notify", ...)."""
    if isinstance(value, (str, Mapping)):
        value = [value]
    if not isinstance(value, list):
        raise _fail(f"notify must be a list of targets, not {type(value).__name__}")
    if len(value) > MAX_TARGETS:
        raise _fail(f"notify has {len(value)} targets; the limit is {MAX_TARGETS}")
    targets = tuple(parse_target(v, channels) for v in value)
    return tuple(dict.fromkeys(targets))  # the same target twice notifies once


def targets_from_dicts(stored: Any) -> tuple[Target, ...]:
    """Targets as the store keeps them (Target.to_dict), already checked when they were accepted."""
    out = []
    for item in stored or ():
        channel = next((c for c in CHANNELS if c in item), None)
        if channel is not None:
            out.append(Target(channel, item[channel], tuple(item.get("events") or DEFAULT_EVENTS)))
    return tuple(out)
