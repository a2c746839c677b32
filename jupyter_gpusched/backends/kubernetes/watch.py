"""List + watch: the caches of Nodes, and of this instance's Jobs and Pods, kept current from the API server.

One thread per kind and namespace lists (in pages), then watches from the list's resourceVersion with
bookmarks on; an expired version (410 Gone) means a fresh list. It keeps going through API outages (with
backoff) and hands every list and event to the backend, which updates its `ClusterCache` under its lock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .api import Connection, KubeApiError
from .config import KubernetesConfig
from .names import job_id_of

log = logging.getLogger(__name__)


class Relist(Exception):
    """The watch's resourceVersion has expired: list again."""


def iter_lines(resp: Any) -> Iterator[bytes]:
    buf = b""
    for chunk in resp.stream(amt=None, decode_content=False):
        buf += chunk
        while True:
            i = buf.find(b"\n")
            if i < 0:
                break
            line, buf = buf[:i], buf[i + 1 :]
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def slim(obj: dict) -> None:
    """Drop what the caches never read (managedFields are most of a cached object's size)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    if obj.get("kind") == "Node" or "images" in (obj.get("status") or {}):
        (obj.get("status") or {}).pop("images", None)


class Watcher(threading.Thread):
    """List + watch one kind of object; keeps going through API outages and expired versions.
    `on_list(kind, path, items)` gets every complete list, `on_event(kind, type, obj)` every change."""

    def __init__(
        self,
        kind: str,
        path: str,
        selector: str | None,
        *,
        conn: Connection,
        cfg: KubernetesConfig,
        stopping: threading.Event,
        on_list: Callable[[str, str, list[dict]], None],
        on_event: Callable[[str, str, dict], None],
    ):
        super().__init__(name=f"gpusched-k8s-watch-{kind}", daemon=True)
        self.kind = kind
        self.path = path
        self.selector = selector
        self.conn = conn
        self.cfg = cfg
        self.stopping = stopping
        self.on_list = on_list
        self.on_event = on_event
        self.synced = threading.Event()
        self.relists = 0
        self._resp: Any = None
        self._rv = ""

    def run(self) -> None:
        rv: str | None = None
        delay = 0.2
        while not self.stopping.is_set():
            try:
                if rv is None:
                    rv = self._list()
                    delay = 0.2
                self._watch(rv)
                rv = self._rv
                delay = 0.2
            except Relist:
                rv = None
            except KubeApiError as exc:
                if exc.gone:
                    rv = None
                    continue
                if self.stopping.is_set():
                    break
                self.conn.failed(exc)
                self.stopping.wait(delay)
                delay = min(delay * 2, self.cfg.max_backoff)
            except Exception:  # a bug must not silently end the watch
                if self.stopping.is_set():
                    break
                log.exception("kubernetes %s watch failed; retrying", self.kind)
                self.stopping.wait(delay)
                delay = min(delay * 2, self.cfg.max_backoff)

    def _list(self) -> str:
        items: list[dict] = []
        cont = None
        while True:
            data = self.conn.request(
                "GET", self.path, query={"labelSelector": self.selector, "limit": 500, "continue": cont}
            )
            items.extend(data.get("items") or [])
            meta = data.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                rv = str(meta.get("resourceVersion") or "")
                break
        self.relists += 1
        for obj in items:
            slim(obj)
        self.on_list(self.kind, self.path, items)
        self.conn.ok()
        self.synced.set()
        return rv

    def _watch(self, rv: str) -> None:
        self._rv = rv
        timeout = self.cfg.watch_timeout
        resp = self.conn.request(
            "GET",
            self.path,
            query={
                "labelSelector": self.selector,
                "watch": True,
                "resourceVersion": rv,
                "allowWatchBookmarks": True,
                "timeoutSeconds": timeout,
            },
            timeout=(3.0, timeout + 30.0),
            stream=True,
        )
        self._resp = resp
        self.conn.ok()
        try:
            for line in iter_lines(resp):
                if self.stopping.is_set():
                    return
                event = json.loads(line)
                etype, obj = event.get("type"), event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Relist()
                    raise KubeApiError(int(obj.get("code") or 0), str(obj.get("message") or "watch error"))
                new_rv = (obj.get("metadata") or {}).get("resourceVersion")
                if new_rv:
                    self._rv = new_rv
                if etype == "BOOKMARK":
                    continue
                slim(obj)
                self.on_event(self.kind, etype, obj)
        except KubeApiError:
            raise
        except Relist:
            raise
        except Exception as exc:
            if self.stopping.is_set():
                return
            raise KubeApiError(0, f"watch of {self.kind} interrupted: {type(exc).__name__}: {exc}") from None
        finally:
            self._resp = None
            try:
                resp.release_conn()
            except Exception:
                pass

    def interrupt(self) -> None:
        resp = self._resp
        if resp is not None:
            for how in ("shutdown", "close"):
                try:
                    getattr(resp, how)()
                except Exception:
                    pass


@dataclass
class Changes:
    """What one list or event changed, for the backend to act on (in this order)."""

    pods: list[tuple[str, dict, bool]] = field(default_factory=list)  # (job id, pod, gone): for the log copy
    jobs: list[str] = field(default_factory=list)  # job ids whose news may have changed
    jobs_listed: bool = False  # a namespace's Jobs were listed afresh (a pending adoption may finish)


class ClusterCache:
    """What the watchers have seen: Nodes by name, Jobs by job id, Pods by job id and name.
    Not thread-safe by itself: the backend holds its lock around every call."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}  # job id -> Job
        self.pods: dict[str, dict[str, dict]] = {}  # job id -> pod name -> Pod
        self.nodes: dict[str, dict] = {}  # node name -> Node
        self.nodes_dirty = True  # the nodes changed since the inventory was last compared
        self.listed: set[str] = set()  # paths listed at least once

    def relisted(self, kind: str, path: str, items: list[dict]) -> Changes:
        """Replace what is cached of `kind` under `path` (a namespace's Jobs or Pods, or all Nodes)."""
        changes = Changes()
        self.listed.add(path)
        if kind == "node":
            self.nodes = {i["metadata"]["name"]: i for i in items}
            self.nodes_dirty = True
            return changes
        ns = path.split("/namespaces/")[1].split("/")[0]
        if kind == "job":
            fresh = {}
            for obj in items:
                jid = job_id_of(obj)
                if jid:
                    fresh[jid] = obj
            gone = [j for j, o in self.jobs.items() if o["metadata"]["namespace"] == ns and j not in fresh]
            for j in gone:
                del self.jobs[j]
            self.jobs.update(fresh)
            changes.jobs = sorted(set(gone) | set(fresh))
            changes.jobs_listed = True
            return changes
        fresh_pods: dict[str, dict[str, dict]] = {}
        for obj in items:
            jid = job_id_of(obj)
            if jid:
                fresh_pods.setdefault(jid, {})[obj["metadata"]["name"]] = obj
        touched = set(fresh_pods)
        for jid, pods in list(self.pods.items()):
            kept = {n: p for n, p in pods.items() if p["metadata"]["namespace"] != ns}
            if len(kept) != len(pods):
                touched.add(jid)
                for n, p in pods.items():
                    if n not in kept and n not in fresh_pods.get(jid, {}):
                        changes.pods.append((jid, p, True))
            if kept:
                self.pods[jid] = kept
            else:
                del self.pods[jid]
        for jid, pods in fresh_pods.items():
            self.pods.setdefault(jid, {}).update(pods)
            changes.pods += [(jid, p, False) for p in pods.values()]
        changes.jobs = sorted(touched)
        return changes

    def changed(self, kind: str, etype: str, obj: dict) -> Changes:
        """Apply one watch event (ADDED, MODIFIED, DELETED)."""
        changes = Changes()
        if kind == "node":
            name = obj["metadata"]["name"]
            if etype == "DELETED":
                self.nodes.pop(name, None)
            else:
                self.nodes[name] = obj
            self.nodes_dirty = True
            return changes
        jid = job_id_of(obj)
        if not jid:
            return changes
        if kind == "job":
            if etype == "DELETED":
                if self.jobs.get(jid, {}).get("metadata", {}).get("uid") == obj["metadata"].get("uid"):
                    del self.jobs[jid]
            else:
                self.jobs[jid] = obj
        else:
            pods = self.pods.setdefault(jid, {})
            if etype == "DELETED":
                pods.pop(obj["metadata"]["name"], None)
                if not pods:
                    del self.pods[jid]
            else:
                pods[obj["metadata"]["name"]] = obj
            changes.pods.append((jid, obj, etype == "DELETED"))
        changes.jobs.append(jid)
        return changes
