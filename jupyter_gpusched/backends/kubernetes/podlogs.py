"""Pod logs -> the job's log.txt: a pool of `log_workers` threads copies each pod's container log (papermill's
`--log-output`); one dispatcher thread hands them the pods whose fetch is due, a pod to one worker at a time.

Every `log_interval` seconds while the pod runs, and once more when it ends: `GET .../pods/NAME/log` with
`timestamps=true`, `sinceTime` (the second of the last line copied; lines up to the last one copied are
skipped by their full timestamp, so nothing is written twice) and `limitBytes` (a fetch that hits the limit
is followed at once by the next). A pod whose log cannot be read (container not started, pod gone, API
down) is simply tried later, with backoff; each new pod starts with a separator line naming its attempt.

Lines `gpusched-checkpoint {"time": ...}` (what `jupyter_gpusched.checkpoint.save` prints in a pod) set the
job's `checkpoint_at`, which the next heartbeat carries to the core (`last_checkpoint_at`).
"""

from __future__ import annotations

import calendar
import json
import logging
import math
import queue
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...checkpoint import LOG_PREFIX
from .api import Connection, KubeApiError
from .config import KubernetesConfig
from .gang import rank_of
from .names import A_ATTEMPT
from .state import SharedState

log = logging.getLogger(__name__)


@dataclass
class PodLog:
    """How far one pod's container log has been copied into its job's log.txt (the log thread's state)."""

    job_id: str
    namespace: str
    name: str
    container: str
    attempt: str
    created: str
    started: bool = False  # a container has started: the kubelet has a log to give
    final: bool = False  # the pod has ended or is going away: fetch until nothing is left, then done
    done: bool = False
    due: float = 0.0  # time.monotonic() of the next fetch
    since_ns: int = -1  # timestamp (ns since the epoch) of the last line copied
    at_since: int = 0  # lines copied that carry exactly that timestamp
    sec_bytes: int = 0  # bytes (as fetched) of the lines copied within that timestamp's second
    copied: int = 0  # bytes written
    header: bool = False  # the separator line was written
    failures: int = 0  # HTTP errors in a row (an unreachable API server is not counted)
    rank: str = ""  # a gang pod's rank: its lines are copied prefixed "[rank N] "
    busy: bool = False  # handed to a worker: not due again until that fetch is over


LOG_TS = re.compile(rb"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def log_timestamp(raw: bytes) -> int | None:
    """An RFC 3339 timestamp (as `timestamps=true` prefixes log lines) in ns since the epoch, or None."""
    m = LOG_TS.match(raw)
    if m is None:
        return None
    y, mo, d, h, mi, sec = (int(x) for x in m.groups()[:6])
    try:
        secs = calendar.timegm((y, mo, d, h, mi, sec, 0, 0, 0))
    except (ValueError, OverflowError):
        return None
    tz = m.group(8)
    if tz != b"Z":
        sign = 1 if tz[:1] == b"+" else -1
        secs -= sign * (int(tz[1:3]) * 3600 + int(tz[4:6]) * 60)
    return secs * 1_000_000_000 + int((m.group(7) or b"0").ljust(9, b"0"))


def split_log_lines(
    data: bytes, since_ns: int, at_since: int, truncated: bool, sec_bytes: int = 0
) -> tuple[list[bytes], int, int, int]:
    """The new lines of a `timestamps=true` log fetch (without their timestamps), and the new (since_ns,
    at_since, sec_bytes): lines older than `since_ns`, and the first `at_since` lines stamped exactly
    `since_ns`, were copied before; `sec_bytes` counts the bytes of the copied lines within since_ns's second
    (what a fetch from that second sends again). With `truncated` (the fetch hit limitBytes) an unfinished
    last line is left for the next fetch, unless it is the only line (then it is kept, cut)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif truncated and len(lines) > 1:
        lines.pop()
    out: list[bytes] = []
    skip = at_since
    for line in lines:
        stamp, _, text = line.partition(b" ")
        ts = log_timestamp(stamp)
        if ts is None:  # not a timestamped line: keep it, as part of the last second seen
            ts, text = max(since_ns, 0), line
        if ts < since_ns:
            continue
        if ts == since_ns and skip > 0:
            skip -= 1
            continue
        out.append(text)
        if ts // 1_000_000_000 != since_ns // 1_000_000_000:
            sec_bytes = 0
        sec_bytes += len(line) + 1
        if ts == since_ns:
            at_since += 1
        else:
            since_ns, at_since, skip = ts, 1, 0
    return out, since_ns, at_since, sec_bytes


CHECKPOINT_LINE = re.compile(re.escape(LOG_PREFIX.strip()).encode() + rb" (\{.*\})")


def checkpoint_time(lines: list[bytes], now: float) -> float | None:
    """The latest save reported in these log lines (`gpusched-checkpoint {"time": ...}`), never after `now`."""
    latest = None
    for line in lines:
        m = CHECKPOINT_LINE.search(line)
        if m is None:
            continue
        try:
            t = json.loads(m.group(1)).get("time")
        except (ValueError, AttributeError):
            continue
        if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0:
            latest = max(latest or 0.0, min(float(t), now))
    return latest


POSITIONS = ".podlog-positions.json"  # in the job's folder: how far each pod's log was copied (for adoption)


def save_position(job_dir: Path, key: str, since_ns: int, at_since: int, sec_bytes: int, copied: int) -> None:
    """Remember how far pod `key`'s log has been copied, so a service adopting the job after a restart goes
    on from there instead of copying it again (log thread only)."""
    path = job_dir / POSITIONS
    try:
        positions = json.loads(path.read_text()) if path.is_file() else {}
        positions[key] = [since_ns, at_since, sec_bytes, copied]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(positions))
        tmp.replace(path)
    except (OSError, ValueError):
        pass


def resume(pl: PodLog, job_dir: Path, key: str) -> None:
    """Start an adopted pod's copy where the previous service left it (nothing saved: from the start)."""
    try:
        saved = json.loads((job_dir / POSITIONS).read_text()).get(key)
    except (OSError, ValueError):
        return
    if saved:
        pl.since_ns, pl.at_since, pl.sec_bytes, pl.copied = (int(v) for v in saved)
        pl.header = True


class PodLogCopier:
    """The log thread and what it knows of each pod: pod uid -> progress (finished pods stay, done, until they
    leave the cache). Adopted jobs go on from the position the previous service saved (`POSITIONS`)."""

    def __init__(self, state: SharedState, conn: Connection, cfg: KubernetesConfig):
        self._state = state
        self._conn = conn
        self.cfg = cfg
        self._pods: dict[str, PodLog] = {}
        self._active: set[str] = set()
        self._wake = threading.Condition(state.lock)
        self._queue: queue.SimpleQueue[tuple[str, PodLog, Path, bool]] = queue.SimpleQueue()
        self._waiting = 0  # fetches handed out and not yet taken by a worker
        self._positions_lock = threading.Lock()  # (a gang's ranks are copied side by side into one job folder)
        self.stats = {"fetches": 0, "fetch_errors": 0, "bytes": 0, "in_flight": 0, "max_in_flight": 0}
        self.thread = threading.Thread(target=self._loop, name="gpusched-k8s-logs", daemon=True)
        self.workers = [
            threading.Thread(target=self._work, name=f"gpusched-k8s-logs-{i + 1}", daemon=True)
            for i in range(max(1, int(cfg.log_workers)))
        ]

    @property
    def threads(self) -> list[threading.Thread]:
        """The dispatcher and its workers (what the backend starts and joins)."""
        return [self.thread, *self.workers]

    def wake_all(self) -> None:
        """On close (lock held)."""
        self._wake.notify_all()

    def seen(self, job_id: str, pod: Mapping, gone: bool = False) -> None:
        """Note what a pod event means for copying its log (lock held; watcher threads)."""
        if not self.cfg.copy_logs:
            return
        meta, status = pod.get("metadata") or {}, pod.get("status") or {}
        key = meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}"
        pl = self._pods.get(key)
        if pl is None:
            t = self._state.tracked.get(job_id)
            if gone or t is None or t.job_dir is None:
                return  # not ours, or adopted and its folder not known yet (`KubernetesBackend.job_dirs`)
            containers = (pod.get("spec") or {}).get("containers") or [{}]
            pl = PodLog(
                job_id,
                meta.get("namespace") or "",
                meta.get("name") or "",
                containers[0].get("name") or "",
                (meta.get("annotations") or {}).get(A_ATTEMPT, "?"),
                meta.get("creationTimestamp") or "",
                rank=rank_of(pod),
            )
            if t.adopted:
                resume(pl, t.job_dir, key)  # copied in part by the service before a restart
            self._pods[key] = pl
            self._active.add(key)
        if pl.done:
            if gone:
                del self._pods[key]
            return
        states = [cs.get("state") or {} for cs in status.get("containerStatuses") or ()]
        wake = False
        if not pl.started and any("running" in st or "terminated" in st for st in states):
            pl.started, pl.due, wake = True, 0.0, True
        if not pl.final and (gone or meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed")):
            pl.final, pl.due, wake = True, 0.0, True
        if pl.final and not pl.started and not pl.header:
            self._done(key, pl)  # it never ran: there is no log to copy
            return
        if wake:
            self._wake.notify()

    def _done(self, key: str, pl: PodLog) -> None:
        pl.done = True
        self._active.discard(key)

    def _due(self, now: float) -> tuple[list[tuple[str, PodLog, Path, bool]], float]:
        """The pods whose log is due now (the oldest unfinished pod of each job first, so one attempt's lines
        are never mixed with the next one's), and when the next one is due (lock held)."""
        first: dict[tuple[str, str], tuple[tuple[bool, str, str], str, PodLog]] = {}
        busy: set[tuple[str, str]] = set()
        for key in self._active:
            pl = self._pods[key]
            if pl.busy:
                busy.add((pl.job_id, pl.rank))
            if not pl.started or pl.busy:
                continue
            order = (not pl.final, pl.created, pl.name)  # (a Job runs one pod at a time: an ended one is older)
            cur = first.get((pl.job_id, pl.rank))  # (a gang's ranks run side by side)
            if cur is None or order < cur[0]:
                first[(pl.job_id, pl.rank)] = (order, key, pl)
        due, nxt = [], math.inf
        for group, (_, key, pl) in first.items():
            if group in busy:
                continue  # one fetch of a job's (rank's) log at a time, so its lines stay in order
            t = self._state.tracked.get(pl.job_id)
            if t is None or t.job_dir is None:
                self._done(key, pl)
                continue
            if pl.due <= now:
                due.append((key, pl, t.job_dir, pl.final))
            else:
                nxt = min(nxt, pl.due)
        return due, nxt

    def _loop(self) -> None:
        """The dispatcher: hands the due pods to the workers, each pod once until its fetch is over, and
        looks again when the workers run short of work, a pod event wakes it, or the next pod is due."""
        while not self._state.stopping.is_set():
            with self._state.lock:
                if self._waiting > len(self.workers):
                    self._wake.wait(1.0)
                    continue
                due, nxt = self._due(time.monotonic())
                if not due:
                    self._wake.wait(max(0.01, min(nxt - time.monotonic(), 1.0)))
                    continue
                for item in due:
                    item[1].busy = True
                self._waiting += len(due)
            for item in due:
                self._queue.put(item)

    def _work(self) -> None:
        """A worker: one fetch at a time, from the dispatcher's queue."""
        while not self._state.stopping.is_set():
            try:
                key, pl, job_dir, final = self._queue.get(timeout=0.5)
            except queue.Empty:
                continue
            with self._state.lock:
                self._waiting -= 1
                self.stats["in_flight"] += 1
                self.stats["max_in_flight"] = max(self.stats["max_in_flight"], self.stats["in_flight"])
                if self._waiting <= len(self.workers):
                    self._wake.notify_all()
            try:
                if not self._state.stopping.is_set():
                    self._copy(key, pl, job_dir, final)
            except Exception:  # a bug must not end the copying of every other log
                log.exception("pod %s/%s: copying its log failed", pl.namespace, pl.name)
                with self._state.lock:
                    self._done(key, pl)
            finally:
                with self._state.lock:
                    pl.busy = False
                    self.stats["in_flight"] -= 1
                    self.stats["fetches"] += 1
                    if self._waiting <= len(self.workers):
                        self._wake.notify_all()  # (this pod may be due again at once: its fetch hit limitBytes)

    def _copy(self, key: str, pl: PodLog, job_dir: Path, final: bool) -> None:
        """One fetch of one pod's log, appended to log.txt (log thread; no lock held while talking)."""
        # sinceTime has whole seconds: a fetch sends again what was copied within the last line's second.
        limit = max(1024, int(self.cfg.log_limit_bytes))
        limit += min(pl.sec_bytes, 15 * limit)
        query: dict[str, Any] = {"container": pl.container or None, "timestamps": True, "limitBytes": limit}
        if pl.since_ns >= 0:
            query["sinceTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(pl.since_ns // 1_000_000_000))
        path = f"/api/v1/namespaces/{pl.namespace}/pods/{pl.name}/log"
        try:
            resp = self._conn.request("GET", path, query=query, stream=True, timeout=(3.0, self.cfg.request_timeout))
            try:
                data = resp.data or b""
            finally:
                try:
                    resp.release_conn()
                except Exception:
                    pass
        except KubeApiError as exc:
            with self._state.lock:
                self.stats["fetch_errors"] += 1
                if exc.status == 404 or (final and exc.status != 0 and pl.failures >= 5):
                    log.debug(
                        "pod %s/%s: log no longer readable (%s %s); done with it",
                        pl.namespace,
                        pl.name,
                        exc.status,
                        exc.message,
                    )
                    self._done(key, pl)
                    return
                if exc.status != 0:
                    pl.failures += 1
                delay = min(0.5 * 2 ** min(pl.failures, 6), max(self.cfg.log_interval, self.cfg.max_backoff))
                log.debug(
                    "pod %s/%s: cannot read its log yet (%s %s); again in %.1f s",
                    pl.namespace,
                    pl.name,
                    exc.status,
                    exc.message,
                    delay,
                )
                pl.due = time.monotonic() + delay
            return
        except Exception as exc:  # the body broke off: as an unreachable API server
            log.debug("pod %s/%s: reading its log broke off: %s", pl.namespace, pl.name, exc)
            with self._state.lock:
                pl.due = time.monotonic() + max(self.cfg.log_interval, 1.0)
            return
        truncated = len(data) >= limit
        lines, since_ns, at_since, sec_bytes = split_log_lines(data, pl.since_ns, pl.at_since, truncated, pl.sec_bytes)
        out = bytearray()
        if lines and not pl.header:
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: ----- attempt {pl.attempt}: log of pod {pl.name}{' (rank ' + pl.rank + ')' if pl.rank else ''} -----\n".encode()
            pl.header = True
        prefix = f"[rank {pl.rank}] ".encode() if pl.rank else b""
        for line in lines:
            out += prefix + line + b"\n"
        stop = False
        if truncated and not lines and since_ns == pl.since_ns and at_since == pl.at_since:
            # More than 16 x limitBytes within the second we resume from, all copied already: skip the rest of
            # that second rather than fetch the same bytes for ever.
            since_ns, at_since, sec_bytes = (pl.since_ns // 1_000_000_000 + 1) * 1_000_000_000, 0, 0
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: (log lines skipped: more than {limit} bytes within one second)\n".encode()
        if pl.copied + len(out) > self.cfg.log_max_bytes:
            out = out[: max(0, self.cfg.log_max_bytes - pl.copied)]
            if out and not out.endswith(b"\n"):
                out += b"\n"
            out += f"[gpusched {time.strftime('%Y-%m-%d %H:%M:%S')}] kubernetes: (the copy of pod {pl.name}'s log stops here: {self.cfg.log_max_bytes} bytes)\n".encode()
            stop = True
        if out:
            self._state.append_log(job_dir, bytes(out), self.cfg.max_log_bytes)
            with self._positions_lock:
                save_position(job_dir, key, since_ns, at_since, sec_bytes, pl.copied + len(out))
        saved = checkpoint_time(lines, time.time())
        with self._state.lock:
            t = self._state.tracked.get(pl.job_id)
            if saved is not None and t is not None and saved > (t.checkpoint_at or 0.0):
                t.checkpoint_at = saved
            pl.since_ns, pl.at_since, pl.sec_bytes, pl.failures = since_ns, at_since, sec_bytes, 0
            pl.copied += len(out)
            self.stats["bytes"] += len(data)
            if stop or (final and not truncated):
                self._done(key, pl)
            else:
                pl.due = time.monotonic() + (0.0 if truncated else self.cfg.log_interval)
                if pl.final and not final:
                    pl.due = 0.0  # it ended while we read: once more, to the end
