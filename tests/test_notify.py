"""Notifications on a real Jupyter server running real notebooks, to real receivers on loopback:
an HTTP server that records webhook calls (and apprise's json:// posts), and an SMTP server (aiosmtpd)."""

from __future__ import annotations

import asyncio
import io
import json

import pytest

from jupyter_gpusched.core.scheduler import SpecError
from jupyter_gpusched.service.notify_targets import Channels, parse_targets
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.receivers import MailBox, Receiver
from jupyter_gpusched.testing.waits import wait_for_async, wait_for_state

pytestmark = pytest.mark.timeout(180)
SECRET = "s3cret-for-tests"


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def mailbox():
    box = MailBox().start()
    yield box
    box.stop()


@pytest.fixture
def gpusched_config(receiver, mailbox):
    return {
        "webhook_secret": SECRET,
        "smtp": {"host": "127.0.0.1", "port": mailbox.port, "starttls": False, "from": "gpusched@example.org"},
        "notify_backoff": 0.05,
        "notify_attempts": 3,
        "notify_timeout": 60.0,
        "notify_defaults": {"tenants": {"default": [{"email": "team@example.org", "events": ["failed"]}]}},
    }


async def received(what, check, timeout: float = 30.0):
    async def ready():
        return check() or None

    return await wait_for_async(ready, timeout, what)


async def test_a_job_end_reaches_a_webhook_a_mailbox_and_apprise(api, jp_root_dir, receiver, mailbox):
    make_notebook(jp_root_dir / "ok.ipynb", "print('hello')")
    receiver.fail["/flaky"] = 2  # fails twice, then answers 200
    notify = [
        {"webhook": receiver.url("/hook"), "events": ["started", "succeeded"]},
        receiver.url("/flaky"),
        "mailto:alice@example.org",
        f"json://127.0.0.1:{receiver.port}/apprise",  # apprise's own JSON poster, to the same receiver
    ]
    code, job = await api("POST", "jobs", {"notebook": "ok.ipynb", "notify": notify})
    assert code == 201, job
    assert job["notify"][0] == {"webhook": receiver.url("/hook"), "events": ["started", "succeeded"]}
    assert job["notify"][3] == {"apprise": "json://…", "events": ["succeeded", "failed", "cancelled"]}
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "SUCCEEDED", done

    await received("webhook: started and succeeded", lambda: len(receiver.to("/hook")) == 2)
    events = sorted(c.json["event"] for c in receiver.to("/hook"))
    assert events == ["started", "succeeded"]
    for call in receiver.to("/hook"):
        assert call.signed_by(SECRET), call.headers
        assert not call.signed_by("another secret")
        assert call.headers["x-gpusched-timestamp"] == str(call.json["sent_at"])
        assert call.json["id"] == job["id"] and call.json["notebook"] == "ok.ipynb"
    end = next(c.json for c in receiver.to("/hook") if c.json["event"] == "succeeded")
    assert end["state"] == "SUCCEEDED" and end["finished"] and end["owner"] == job["owner"]

    await received("flaky webhook: retried until delivered", lambda: receiver.to("/flaky", 200))
    flaky = receiver.to("/flaky")
    assert [c.status for c in flaky] == [500, 500, 200]  # retried, delivered once
    assert len({c.headers["x-gpusched-delivery"] for c in flaky}) == 1  # one delivery, three tries
    assert all(c.signed_by(SECRET) for c in flaky)

    await received("mail", lambda: mailbox.messages)
    mail = mailbox.messages[0]
    assert mail["To"] == "alice@example.org" and mail["From"] == "gpusched@example.org"
    assert mail["Subject"] == f"[gpusched] job {job['id']} SUCCEEDED: ok.ipynb"
    assert f"id: {job['id']}" in mail.get_payload() and "state: SUCCEEDED" in mail.get_payload()

    await received("apprise json:// post", lambda: receiver.to("/apprise", 200))
    chat = receiver.to("/apprise")[0].json
    assert chat["title"] == f"[gpusched] job {job['id']} SUCCEEDED: ok.ipynb"
    assert "notebook: ok.ipynb" in chat["message"]

    code, history = await api("GET", f"jobs/{job['id']}/events")
    assert not any("notification" in e["reason"] for e in history["events"])  # all delivered


async def test_a_dead_receiver_is_noted_in_the_jobs_events(api, jp_root_dir, receiver):
    make_notebook(jp_root_dir / "bad.ipynb", "1/0")
    receiver.fail["/dead"] = 99
    code, job = await api("POST", "jobs", {"notebook": "bad.ipynb", "notify": [receiver.url("/dead")]})
    assert code == 201, job
    await wait_for_state(api, job["id"], {"FAILED"})

    async def noted():
        code, history = await api("GET", f"jobs/{job['id']}/events")
        notes = [e for e in history["events"] if e["actor"] == "notify"]
        return notes or None

    notes = await wait_for_async(noted, 30, "the failed notification in the job's events")
    port = receiver.port
    assert notes[0]["reason"].startswith(f"notification to webhook http://127.0.0.1:{port} failed after 3 tries")
    assert notes[0]["from"] == notes[0]["to"] == "FAILED"
    assert len(receiver.to("/dead")) == 3


async def test_a_hanging_receiver_does_not_hold_up_scheduling(api, jp_root_dir, receiver):
    make_notebook(jp_root_dir / "quick.ipynb", "x = 1")
    receiver.hang.add("/hang")
    code, first = await api("POST", "jobs", {"notebook": "quick.ipynb", "notify": [receiver.url("/hang")] * 1})
    assert code == 201
    await wait_for_state(api, first["id"], {"SUCCEEDED"})
    await received("the receiver holds the notification", lambda: receiver.hanging == 1)
    # while it hangs, other jobs are admitted, run and end
    others = []
    for _ in range(3):
        code, job = await api("POST", "jobs", {"notebook": "quick.ipynb", "notify": []})
        others.append(job["id"])
    for job_id in others:
        done = await wait_for_state(api, job_id, {"SUCCEEDED", "FAILED"})
        assert done["state"] == "SUCCEEDED"
    assert receiver.hanging == 1 and not receiver.to("/hang")  # still held the whole time
    receiver.release.set()
    await received("the held notification answered", lambda: receiver.to("/hang", 200))


@pytest.mark.parametrize(
    "notify, says",
    [
        ([{"webhook": "ftp://example.org/x"}], "http:// or https://"),
        ([{"webhook": "file:///etc/passwd"}], "http:// or https://"),
        (["http://"], "names no host"),
        ([{"email": "not-an-address"}], "not a mail address"),
        (["mailto:a@b"], "not a mail address"),
        ([{"webhook": "https://example.org", "events": ["exploded"]}], "unknown event"),
        ([{"webhook": "https://example.org", "email": "a@example.org"}], "exactly one of"),
        ([{"slack": "https://example.org"}], "unknown key"),
        (["nosuchservice://token"], "apprise does not understand"),
        (["just words"], "no notify target"),
        ([7], "an object or a string"),
        ("https://example.org/" + "x" * 3000, "limit is 2048"),
        ([f"https://example.org/{i}" for i in range(11)], "the limit is 10"),
        (42, "must be a list"),
    ],
)
async def test_bad_targets_are_refused_with_400(api, jp_root_dir, notify, says):
    make_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, err = await api("POST", "jobs", {"notebook": "nb.ipynb", "notify": notify})
    assert code == 400, err
    assert err["field"] == "notify" and says in err["message"], err
    code, listing = await api("GET", "jobs")
    assert listing["jobs"] == []  # nothing was queued


async def test_user_defaults_apply_to_jobs_without_notify(api, jp_root_dir, receiver):
    make_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, mine = await api("GET", "settings/notify")
    assert code == 200
    assert mine == {"notify": [{"email": "team@example.org", "events": ["failed"]}], "source": "config:tenant"}

    code, mine = await api("PUT", "settings/notify", {"notify": [receiver.url("/mine")]})
    assert code == 200 and mine["source"] == "user", mine
    code, job = await api("POST", "jobs", {"notebook": "nb.ipynb"})
    assert job["notify"] == [{"webhook": receiver.url("/mine"), "events": ["succeeded", "failed", "cancelled"]}]
    await wait_for_state(api, job["id"], {"SUCCEEDED"})
    await received("the default webhook", lambda: receiver.to("/mine", 200))

    code, silent = await api("POST", "jobs", {"notebook": "nb.ipynb", "notify": []})
    assert silent["notify"] == []  # [] on the job turns the defaults off

    code, err = await api("PUT", "settings/notify", {"notify": ["ftp://x"]})
    assert code == 400 and err["field"] == "notify"
    code, err = await api("PUT", "settings/notify", {"targets": []})
    assert code == 400 and err["field"] == "targets"
    code, mine = await api("PUT", "settings/notify", {"notify": None})
    assert code == 200 and mine["source"] == "config:tenant"


def test_channels_the_server_lacks_are_refused():
    none = Channels(webhook=False, email=False, apprise=True)
    with pytest.raises(SpecError, match="webhook_secret"):
        parse_targets(["https://example.org/hook"], none)
    with pytest.raises(SpecError, match="c.GPUSched.smtp"):
        parse_targets(["a@example.org"], none)
    assert parse_targets("json://localhost/x", none)[0].channel == "apprise"
    both = parse_targets(["a@example.org", "mailto:a@example.org"])
    assert len(both) == 1  # the same target twice notifies once


async def test_a_job_submitted_from_the_cli_with_notify_reaches_its_webhook(api, jp_serverapp, jp_root_dir, receiver):
    """`jupyter gpusched submit NB --notify URL` end to end: the job carries the target, the webhook hears it end."""
    from jupyter_gpusched.cli import build_parser, run

    make_notebook(jp_root_dir / "cli.ipynb", "x = 1")
    url, token = jp_serverapp.connection_url, jp_serverapp.identity_provider.token
    nb = str(jp_root_dir / "cli.ipynb")  # a path on this machine (relative ones are to the current folder)
    argv = ["--url", url, "--token", token, "submit", nb, "--notify", receiver.url("/cli"), "--json"]
    out = io.StringIO()
    assert await asyncio.to_thread(run, build_parser().parse_args(argv), out) == 0, out.getvalue()
    job = json.loads(out.getvalue())
    assert job["notify"] == [{"webhook": receiver.url("/cli"), "events": ["succeeded", "failed", "cancelled"]}]
    done = await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    assert done["state"] == "SUCCEEDED", done
    await received("webhook from a CLI-submitted job", lambda: receiver.to("/cli", 200))
    call = receiver.to("/cli")[0]
    assert call.signed_by(SECRET) and call.json["id"] == job["id"] and call.json["event"] == "succeeded"


def test_cli_and_magic_take_notify(tmp_path):
    from jupyter_gpusched import cli
    from jupyter_gpusched.cli.options import spec_from_args
    from jupyter_gpusched.magic import _cell_parser

    argv = ["--notify", "https://example.org/hook", "--notify", "mailto:a@example.org"]
    args = cli.build_parser().parse_args(["submit", "nb.ipynb", *argv])
    assert spec_from_args(args)["notify"] == ["https://example.org/hook", "mailto:a@example.org"]
    assert spec_from_args(_cell_parser().parse_args(argv))["notify"] == [
        "https://example.org/hook",
        "mailto:a@example.org",
    ]
    assert spec_from_args(cli.build_parser().parse_args(["submit", "nb.ipynb", "--notify", "none"]))["notify"] == []
    assert "notify" not in spec_from_args(cli.build_parser().parse_args(["submit", "nb.ipynb"]))
