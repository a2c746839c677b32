"""The log and output endpoints stream their files in chunks and honour `Range` and `offset` + `length`
(issue 11, defect 4); offsets past any file give a 4xx, not a 500 (defect 6); a job's log is capped on disk."""

from __future__ import annotations

import json
import os
import tracemalloc

import pytest

from jupyter_gpusched.backends import LaunchRequest, LocalBackend, log_path
from jupyter_gpusched.backends.kubernetes.state import SharedState
from jupyter_gpusched.backends.logcap import trim_log
from jupyter_gpusched.client import Client
from jupyter_gpusched.core.model import TERMINAL_STATE_NAMES as TERMINAL
from jupyter_gpusched.server.handlers.jobs import MAX_LOG_READ
from jupyter_gpusched.server.streaming import Unsatisfiable, parse_range
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import run_to_end, wait_for, wait_for_state

pytestmark = pytest.mark.timeout(180)

MiB = 1024 * 1024


async def finish_a_job(api, jp_root_dir) -> dict:
    make_notebook(jp_root_dir / "quick.ipynb", "x = 1")
    code, job = await api("POST", "jobs", {"notebook": "quick.ipynb"})
    assert code == 201, job
    return await wait_for_state(api, job["id"], {"SUCCEEDED"})


async def raw_get(jp_fetch, job_id: str, what: str, headers=None, **params):
    """GET jobs/{id}/{what}, the body as bytes."""
    return await jp_fetch(
        "gpusched", "api", "jobs", job_id, what, headers=headers or {}, params=params or None, raise_error=False
    )


def test_parse_range():
    assert parse_range(None, 100) is None
    assert parse_range("bytes=0-9", 100) == (0, 10)
    assert parse_range("bytes=90-", 100) == (90, 10)
    assert parse_range("bytes=95-200", 100) == (95, 5)
    assert parse_range("bytes=-10", 100) == (90, 10)
    assert parse_range("bytes=-1000", 100) == (0, 100)
    assert parse_range("bytes=5-2", 100) is None  # invalid: ignored, as RFC 9110 allows
    assert parse_range("bytes=0-1,5-6", 100) is None  # several ranges: the whole file
    assert parse_range("items=0-1", 100) is None
    for unsatisfiable in ("bytes=100-", "bytes=100-200", "bytes=-0", "bytes=" + "9" * 5000 + "-"):
        with pytest.raises(Unsatisfiable):
            parse_range(unsatisfiable, 100)
    with pytest.raises(Unsatisfiable):
        parse_range("bytes=-5", 0)


async def test_log_is_served_in_capped_reads_that_a_follower_joins_up(api, jp_fetch, service, jp_root_dir):
    finished_job = await finish_a_job(api, jp_root_dir)
    job_id = finished_job["id"]
    data = os.urandom(3 * MiB).hex().encode()  # 6 MiB of text, more than one read
    service.log_file(job_id).write_bytes(data)

    r = await raw_get(jp_fetch, job_id, "log")
    assert r.code == 200 and len(r.body) == MAX_LOG_READ and r.headers["X-Log-Offset"] == str(MAX_LOG_READ)
    assert r.headers["Content-Type"].startswith("text/plain") and r.headers["Accept-Ranges"] == "bytes"
    got, offset = b"", 0
    while True:  # as the lab panel and `gpusched logs -f` follow a log
        r = await raw_get(jp_fetch, job_id, "log", offset=str(offset))
        assert r.code == 200
        if not r.body:
            break
        got += r.body
        offset = int(r.headers["X-Log-Offset"])
    assert got == data and offset == len(data)

    r = await raw_get(jp_fetch, job_id, "log", offset="100", length="10")
    assert r.body == data[100:110] and r.headers["X-Log-Offset"] == "110"
    for bad in ("0", "-1", str(MAX_LOG_READ + 1), "ten"):
        code, err = await api("GET", f"jobs/{job_id}/log", length=bad)
        assert code == 400 and err["field"] == "length", err


@pytest.mark.parametrize("offset", ["17592186044416", "9223372036854775808", "1" + "0" * 400])
async def test_offsets_past_the_log_are_refused_with_a_message(api, service, jp_root_dir, offset):
    finished_job = await finish_a_job(api, jp_root_dir)
    code, err = await api("GET", f"jobs/{finished_job['id']}/log", offset=offset)
    assert 400 <= code < 500, (code, err)
    assert set(err) == {"error", "message", "field"} and err["field"] == "offset", err


async def test_range_requests_on_the_log_and_the_output(api, jp_fetch, service, jp_root_dir):
    finished_job = await finish_a_job(api, jp_root_dir)
    job_id = finished_job["id"]
    log = service.log_file(job_id).read_bytes()
    size = len(log)
    r = await raw_get(jp_fetch, job_id, "log", headers={"Range": "bytes=3-12"})
    assert r.code == 206 and r.body == log[3:13]
    assert r.headers["Content-Range"] == f"bytes 3-12/{size}" and r.headers["X-Log-Offset"] == "13"
    r = await raw_get(jp_fetch, job_id, "log", headers={"Range": "bytes=-7"})
    assert r.code == 206 and r.body == log[-7:]
    r = await raw_get(jp_fetch, job_id, "log", headers={"Range": f"bytes={size}-"})
    assert r.code == 416 and r.headers["Content-Range"] == f"bytes */{size}"
    assert set(json.loads(r.body)) == {"error", "message", "field"}

    output = service.output_file(job_id).read_bytes()
    r = await raw_get(jp_fetch, job_id, "output")
    assert r.code == 200 and r.body == output and r.headers["Accept-Ranges"] == "bytes"
    assert r.headers["Content-Disposition"] == f'attachment; filename="{job_id}.ipynb"'
    r = await raw_get(jp_fetch, job_id, "output", headers={"Range": "bytes=0-99"})
    assert r.code == 206 and r.body == output[:100]
    assert r.headers["Content-Range"] == f"bytes 0-99/{len(output)}"


async def test_a_big_output_is_sent_without_loading_it(api, jp_fetch, service, jp_root_dir):
    finished_job = await finish_a_job(api, jp_root_dir)
    """The server holds one chunk at a time, not the file: traced allocations while a 48 MiB file is sent
    (the client throws each piece away as it arrives) stay far below its size."""
    job_id = finished_job["id"]
    service.output_file(job_id).write_bytes(b"x" * (48 * MiB))
    received = 0

    def take(piece: bytes) -> None:
        nonlocal received
        received += len(piece)

    tracemalloc.start()
    try:
        r = await jp_fetch(
            "gpusched", "api", "jobs", job_id, "output", streaming_callback=take, raise_error=False, request_timeout=120
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.code == 200 and received == 48 * MiB
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB allocated while sending a 48 MiB file"


def test_trim_log_keeps_the_tail_under_a_marker(tmp_path):
    log = tmp_path / "log.txt"
    log.write_bytes(b"".join(b"line %06d\n" % i for i in range(10_000)))  # 120,000 bytes
    assert trim_log(log, 200_000) == 120_000  # under the cap: untouched
    size = trim_log(log, 20_000)
    text = log.read_text()
    first, rest = text.split("\n", 1)
    assert "passed its cap of 20000 bytes" in first and "dropped" in first
    assert rest.startswith("line ") and rest.endswith("line 009999\n")
    assert 10_000 - 12 <= len(rest) <= 10_000 and size == len(text)


def test_a_runners_log_is_capped_on_disk(tmp_path):
    """A notebook that prints ~2 MB under a 256 KB cap: the log stays near the cap, says its head was
    dropped, and keeps the end (the last printed line and the runner's exit line)."""
    backend = LocalBackend(heartbeat_interval=0.3, max_log_bytes=256_000)
    nb = make_notebook(
        tmp_path / "nb" / "loud.ipynb", "for i in range(20_000):\n    print('line', i, 'x' * 80)\nprint('the end')"
    )
    req = LaunchRequest("loud", nb, nb.parent, {}, (0,), tmp_path / "jobs" / "loud", 120.0)
    try:
        backend.launch(req)
        updates = run_to_end(backend, {"loud"}, timeout=120)
        assert updates["loud"][-1].kind == "succeeded", updates
    finally:
        backend.close()
    data = log_path(req.job_dir).read_bytes()
    assert len(data) <= 256_000 + 1024, len(data)
    assert b"dropped" in data.split(b"\n", 1)[0]
    assert b"the end" in data and b"gpusched-runner: exit 0" in data


def test_a_follower_reads_a_trimmed_log_again_from_its_new_start(live_server):
    """A follower's offset past a log that was trimmed under it (416) starts again at the log's new head."""
    make_notebook(live_server.root / "talk.ipynb", "print('hello')")
    client = Client(live_server.url, live_server.token)
    job = client.submit("talk.ipynb")
    wait_for(lambda: client.get(job["id"])["state"] in TERMINAL, 120, "the job to end")
    text, offset = client.log(job["id"])
    assert "hello" in text and offset > 0
    log = live_server.data / "jobs" / job["id"] / "log.txt"
    with open(log, "ab") as f:  # the job talks on, past its cap, and the head is dropped
        f.write(b"more\n" * offset)
    assert trim_log(log, offset) < offset
    again, after = client.log(job["id"], offset)
    assert again.startswith("[gpusched") and "were dropped" in again.splitlines()[0]
    assert after == log.stat().st_size


def test_the_kubernetes_pod_log_copies_keep_the_jobs_log_under_its_cap(tmp_path):
    state = SharedState()
    for i in range(100):  # what the pod-log copier appends, fetch after fetch
        state.append_log(tmp_path, f"line {i:03d} ".encode() + b"x" * 90 + b"\n", max_bytes=2_000)
    text = log_path(tmp_path).read_text()
    assert len(text) <= 2_000 and "were dropped" in text.splitlines()[0]
    assert text.rstrip().endswith("x") and "line 099" in text and "line 000" not in text
