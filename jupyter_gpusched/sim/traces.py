"""Trace loaders: one per format, each returning `TraceJob`s sorted by submit time.

Formats
- ``philly``: the Philly per-job table (``philly_jobs_pollux.csv.gz``); the VC is the tenant.
- ``alibaba-2023``: the Alibaba GPU-sharing pod list (``openb_pod_list_default.csv.gz``);
  QoS is the priority (and the tenant), ``pod_phase`` the status, ``gpu_milli`` the share
  of a GPU the pod really asked for.
- ``csv``: the plain format for users' own traces (see docs/simulator.md)::

      submit_time,duration,gpus,tenant,priority,preemptible

Node lists: ``philly-machines`` (``cluster_machine_list.csv`` or ``revised_machine_list.csv``)
and ``alibaba-nodes`` (``openb_node_list_*.csv.gz``).

A malformed trace raises `TraceError` naming the file, the line, the column and why.
"""

from __future__ import annotations

import csv
import gzip
import math
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.model import NodeSpec, Priority

__all__ = [
    "TRACE_FORMATS",
    "NODE_FORMATS",
    "Trace",
    "TraceError",
    "TraceJob",
    "load_alibaba_2023",
    "load_alibaba_nodes",
    "load_csv",
    "load_nodes",
    "load_philly",
    "load_philly_machines",
    "load_trace",
]


class TraceError(ValueError):
    """A trace the simulator cannot replay. `line` is the 1-based line in the file
    (the header is line 1), `column` the offending column."""

    def __init__(self, path: str | Path, message: str, line: int | None = None, column: str | None = None):
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column!r}"
        super().__init__(f"{where}: {message}")
        self.path = str(path)
        self.line = line
        self.column = column
        self.reason = message


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace, as the simulator replays it.

    `submit` is in seconds since the trace's origin. `duration` is the job's runtime on
    its GPUs when it runs undisturbed. `status` is how the job ended in the real cluster:
    ``ok`` (succeeded), ``failed`` (fails after `duration`) or ``cancelled`` (the user
    withdrew it `duration` seconds after submitting, whether it ran or not).
    """

    id: str
    submit: float
    duration: float
    gpus: int
    tenant: str = "default"
    priority: Priority | None = None  # None: the trace has none; the scenario assigns one
    preemptible: bool | None = None  # None: the trace says nothing; the scenario decides
    status: str = "ok"
    gpu_fraction: float | None = None  # share of each GPU it uses, where the trace says
    est_runtime: float | None = None  # a user's own runtime estimate, where the trace has one


@dataclass(slots=True)
class Trace:
    """Jobs sorted by submit time, plus what the loader left out and why."""

    jobs: list[TraceJob]
    origin: datetime | None = None  # wall-clock time of submit == 0, where the trace has one
    skipped: dict[str, int] = field(default_factory=dict)
    source: str = ""
    format: str = ""

    def __len__(self) -> int:
        return len(self.jobs)

    def to_seconds(self, value: str | float | int | datetime) -> float:
        """A window bound as seconds since the origin: a number is taken as seconds already,
        a date/time string needs a trace with a wall-clock origin."""
        if isinstance(value, bool):
            raise ValueError(f"bad time {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if self.origin is None:
            raise ValueError(
                f"time {value!r}: this trace ({self.format}) has relative times; give the window in seconds"
            )
        try:
            ts = pd.Timestamp(value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"time {value!r} is neither seconds nor a date/time ({exc})") from None
        return (ts.to_pydatetime() - self.origin).total_seconds()

    def select(
        self,
        *,
        start: float | None = None,
        end: float | None = None,
        tenants: Iterable[str] | None = None,
        max_gpus: int | None = None,
        limit: int | None = None,
    ) -> Trace:
        """A sub-trace: submit in [start, end), only `tenants`, at most `max_gpus` GPUs,
        then the first `limit` jobs. Counts of what was left out go to `skipped`."""
        keep = set(tenants) if tenants is not None else None
        skipped = dict(self.skipped)
        out: list[TraceJob] = []

        def skip(why: str) -> None:
            skipped[why] = skipped.get(why, 0) + 1

        for job in self.jobs:
            if start is not None and job.submit < start:
                skip("before the window")
            elif end is not None and job.submit >= end:
                skip("after the window")
            elif keep is not None and job.tenant not in keep:
                skip("other tenants")
            elif max_gpus is not None and job.gpus > max_gpus:
                skip(f"more than {max_gpus} GPUs")
            elif limit is not None and len(out) >= limit:
                skip("past the job limit")
            else:
                out.append(job)
        return Trace(out, self.origin, skipped, self.source, self.format)

    def with_jobs(self, jobs: Sequence[TraceJob]) -> Trace:
        return Trace(list(jobs), self.origin, dict(self.skipped), self.source, self.format)


# --- helpers: vectorised checks that still name the first bad row ---------------------------
def _read(path: str | Path, **kwargs) -> pd.DataFrame:
    p = Path(path)
    if not p.is_file():
        raise TraceError(p, "file not found")
    try:
        return pd.read_csv(p, **kwargs)
    except pd.errors.EmptyDataError:
        raise TraceError(p, "the file is empty") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, EOFError) as exc:
        raise TraceError(p, f"not a readable CSV file ({exc})") from None


def _require_columns(path, df: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        have = ", ".join(map(str, df.columns)) or "none"
        raise TraceError(path, f"missing column(s) {', '.join(missing)}; found: {have}", line=1)


def _fail_first(path, df: pd.DataFrame, bad: pd.Series, column: str, why: str) -> None:
    """Raise for the first row flagged in `bad` (a boolean Series aligned with df)."""
    if bool(bad.any()):
        pos = int(bad.to_numpy().nonzero()[0][0])
        value = df[column].iloc[pos]
        shown = "empty" if _is_missing(value) else repr(str(value))
        raise TraceError(path, f"{why}, got {shown}", line=int(df.index[pos]) + 2, column=column)


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA or str(value) == ""


def _numbers(path, df: pd.DataFrame, column: str, *, why: str = "expected a number") -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    _fail_first(path, df, values.isna() | ~values.map(_finite), column, why)
    return values.astype(float)


def _finite(x) -> bool:
    try:
        return math.isfinite(x)
    except TypeError:
        return False


def _whole(path, df, column: str, *, minimum: int, why: str) -> pd.Series:
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() | ~values.map(_finite)
    bad = bad | (values.fillna(0) % 1 != 0) | (values.fillna(minimum) < minimum)
    _fail_first(path, df, bad, column, why)
    return values.astype(int)


def _sorted(jobs: list[TraceJob]) -> list[TraceJob]:
    # stable: equal submit times keep file order
    return sorted(jobs, key=lambda j: j.submit)


DURATION_WHY = "expected a duration of 0 seconds or more (0: left out)"
GPUS_WHY = "expected a whole number of GPUs, 0 or more (0: a CPU-only job, left out)"


def _gpu_work(path, duration: pd.Series, gpus: pd.Series) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows are GPU work to replay, and counts of the rest: a real job log has CPU-only
    jobs and jobs that ended at once, which hold no GPU time; they are left out and counted
    (the report shows the counts), not refused. Nothing left at all is an error."""
    cpu_only = (gpus == 0).to_numpy()
    zero = (duration == 0).to_numpy() & ~cpu_only
    skipped = {k: int(n) for k, n in (("CPU-only jobs", cpu_only.sum()), ("zero-length jobs", zero.sum())) if n}
    keep = ~(cpu_only | zero)
    if len(keep) and not keep.any():
        raise TraceError(path, f"no GPU jobs to replay ({', '.join(f'{n} {k}' for k, n in skipped.items())})")
    return keep, skipped


# --- Philly ------------------------------------------------------------------------------------
def load_philly(path: str | Path) -> Trace:
    """The Philly per-job table: timestamp, duration (s), num_gpus, gpu_time, cluster (the VC).
    Job ids are ``philly-<row>`` (0-based data row), so they are stable under any window."""
    df = _read(path, dtype={"cluster": str, "timestamp": str})
    _require_columns(path, df, ["timestamp", "duration", "num_gpus", "cluster"])
    stamps = pd.to_datetime(df["timestamp"], format="%Y-%m-%d %H:%M:%S", errors="coerce")
    _fail_first(path, df, stamps.isna(), "timestamp", "expected a date and time as YYYY-MM-DD HH:MM:SS")
    duration = _numbers(path, df, "duration", why="expected a number of seconds")
    _fail_first(path, df, duration < 0, "duration", DURATION_WHY)
    gpus = _whole(path, df, "num_gpus", minimum=0, why=GPUS_WHY)
    tenant = df["cluster"].fillna("").astype(str).str.strip()
    _fail_first(path, df, tenant == "", "cluster", "expected a VC name")
    origin = stamps.min().to_pydatetime()
    submit = (stamps - stamps.min()).dt.total_seconds().to_numpy()
    keep, skipped = _gpu_work(path, duration, gpus)
    jobs = [
        TraceJob(f"philly-{i}", float(t), float(d), int(g), v)
        for i, (t, d, g, v, k) in enumerate(
            zip(submit, duration.to_numpy(), gpus.to_numpy(), tenant.to_numpy(), keep, strict=True)
        )
        if k
    ]
    return Trace(_sorted(jobs), origin=origin, skipped=skipped, source=str(path), format="philly")


# --- Alibaba 2023 ------------------------------------------------------------------------------
ALIBABA_QOS_PRIORITY = {
    "LS": Priority.HIGH,  # latency-sensitive
    "Guaranteed": Priority.HIGH,
    "Burstable": Priority.NORMAL,
    "BE": Priority.LOW,  # best effort
}


def load_alibaba_2023(path: str | Path) -> Trace:
    """The Alibaba GPU-sharing pod list. One job per pod that asks for a GPU (CPU-only pods
    are left out). Runtime: deletion - scheduled. A Pending pod never ran in the real
    cluster: it is replayed as a job the user cancels at its deletion time. QoS LS and
    Guaranteed are high priority, Burstable normal, BE (best effort) low and preemptible;
    the QoS class is also the tenant (the trace has no users)."""
    df = _read(path, dtype={"name": str, "qos": str, "pod_phase": str})
    cols = ["name", "num_gpu", "gpu_milli", "qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"]
    _require_columns(path, df, cols)
    gpus = _whole(path, df, "num_gpu", minimum=0, why="expected a whole number of GPUs, 0 or more")
    milli = _whole(path, df, "gpu_milli", minimum=0, why="expected thousandths of a GPU, 0 or more")
    _fail_first(path, df, milli > 1000, "gpu_milli", "expected at most 1000 thousandths of a GPU")
    created = _numbers(path, df, "creation_time", why="expected a time in seconds")
    deleted = _numbers(path, df, "deletion_time", why="expected a time in seconds")
    _fail_first(path, df, deleted < created, "deletion_time", "a pod cannot be deleted before it was created")
    qos = df["qos"].fillna("").astype(str).str.strip()
    _fail_first(
        path, df, ~qos.isin(list(ALIBABA_QOS_PRIORITY)), "qos", f"expected one of {', '.join(ALIBABA_QOS_PRIORITY)}"
    )
    phase = df["pod_phase"].fillna("").astype(str).str.strip()
    phases = {"Running", "Succeeded", "Failed", "Pending"}
    _fail_first(path, df, ~phase.isin(list(phases)), "pod_phase", f"expected one of {', '.join(sorted(phases))}")
    sched = pd.to_numeric(df["scheduled_time"], errors="coerce")
    ran = phase != "Pending"
    _fail_first(path, df, ran & sched.isna(), "scheduled_time", "a pod that ran needs the time it was scheduled")
    _fail_first(path, df, ran & (sched < created), "scheduled_time", "a pod cannot be scheduled before it was created")
    _fail_first(path, df, ran & (sched > deleted), "scheduled_time", "a pod cannot be scheduled after it was deleted")

    skipped: dict[str, int] = {}
    jobs = []
    for i in range(len(df)):
        g = int(gpus.iat[i])
        if g == 0:
            skipped["CPU-only pods"] = skipped.get("CPU-only pods", 0) + 1
            continue
        p = phase.iat[i]
        c = float(created.iat[i])
        if p == "Pending":
            status, duration = "cancelled", float(deleted.iat[i]) - c
        else:
            status = "failed" if p == "Failed" else "ok"
            duration = float(deleted.iat[i]) - float(sched.iat[i])
        if duration <= 0:
            skipped["zero-length pods"] = skipped.get("zero-length pods", 0) + 1
            continue
        q = qos.iat[i]
        jobs.append(
            TraceJob(
                id=str(df["name"].iat[i]),
                submit=c,
                duration=duration,
                gpus=g,
                tenant=q.lower(),
                priority=ALIBABA_QOS_PRIORITY[q],
                preemptible=q == "BE",
                status=status,
                gpu_fraction=int(milli.iat[i]) / 1000.0,
            )
        )
    return Trace(_sorted(jobs), origin=None, skipped=skipped, source=str(path), format="alibaba-2023")


# --- plain CSV ---------------------------------------------------------------------------------
CSV_COLUMNS = ("submit_time", "duration", "gpus", "tenant", "priority", "preemptible")
_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f", ""}


def _read_plain(path: str | Path) -> pd.DataFrame:
    """Read the plain CSV as text. A row with more fields than the header is reported as
    such (pandas would take a first row's extra field as an index and shift the columns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.ParserWarning)
        try:
            return _read(path, dtype=str, keep_default_na=False, skipinitialspace=True, index_col=False)
        except (TraceError, pd.errors.ParserWarning) as exc:
            long = _first_long_row(Path(path))
            if long is not None:
                line, fields, named = long
                extra = fields - named
                raise TraceError(
                    path,
                    f"{fields} fields where the header names {named}: {extra} extra field{'s' if extra > 1 else ''}"
                    " (a stray comma, or a value with a comma that needs quotes?)",
                    line=line,
                ) from None
            if isinstance(exc, TraceError):
                raise
            raise TraceError(path, f"not a readable CSV file ({exc})") from None


def _first_long_row(path: Path) -> tuple[int, int, int] | None:
    """(line, fields, header fields) of the first row with more fields than the header."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", newline="") as f:
            rows = csv.reader(f, skipinitialspace=True)
            header = next(rows, [])
            for row in rows:
                if len(row) > len(header):
                    return rows.line_num, len(row), len(header)
    except (OSError, EOFError, UnicodeDecodeError, csv.Error):
        return None
    return None


def load_csv(path: str | Path) -> Trace:
    """The plain format: a header row naming at least ``submit_time, duration, gpus`` and
    optionally ``tenant, priority, preemptible, job_id, status, est_runtime``.

    - submit_time: seconds (any origin), or ISO 8601 date-times in every row;
    - duration: seconds >= 0; gpus: whole number >= 0 (rows with 0 of either are left out, counted);
    - tenant: a name (empty: ``default``); priority: high/normal/low (empty: normal);
    - preemptible: true/false, yes/no, 1/0 (empty: false);
    - status: ok/failed/cancelled (empty: ok); est_runtime: seconds, the user's estimate.
    """
    df = _read_plain(path)
    df.columns = [str(c).strip() for c in df.columns]
    _require_columns(path, df, ["submit_time", "duration", "gpus"])
    if df.empty:
        raise TraceError(path, "no jobs (only a header row)")
    raw_submit = df["submit_time"].str.strip()
    numeric = pd.to_numeric(raw_submit, errors="coerce")
    origin = None
    if not pd.isna(numeric.iat[0]):  # the first row sets the kind: seconds ...
        _fail_first(path, df, numeric.isna(), "submit_time", "expected seconds like the rows above (not a date-time)")
        _fail_first(path, df, ~numeric.map(_finite), "submit_time", "expected a finite number of seconds")
        submit = numeric.astype(float)
    else:  # ... or ISO 8601 date-times
        stamps = pd.to_datetime(raw_submit, errors="coerce", format="ISO8601")
        if pd.isna(stamps.iat[0]):
            why = "expected seconds or an ISO 8601 date-time (2024-01-31T12:00:00)"
        else:
            why = "expected an ISO 8601 date-time like the rows above (2024-01-31T12:00:00)"
        _fail_first(path, df, stamps.isna() | numeric.notna(), "submit_time", why)
        origin = stamps.min().to_pydatetime()
        submit = (stamps - stamps.min()).dt.total_seconds()
    duration = _numbers(path, df, "duration", why="expected a number of seconds")
    _fail_first(path, df, duration < 0, "duration", DURATION_WHY)
    gpus = _whole(path, df, "gpus", minimum=0, why=GPUS_WHY)

    def text(col: str, default: str) -> pd.Series:
        if col not in df.columns:
            return pd.Series([default] * len(df), index=df.index)
        return df[col].str.strip().replace("", default)

    tenant = text("tenant", "default")
    prio_raw = text("priority", "normal").str.lower()
    names = {p.label: p for p in Priority}
    _fail_first(
        path, df.assign(priority=prio_raw), ~prio_raw.isin(list(names)), "priority", "expected high, normal or low"
    )
    pre_raw = text("preemptible", "false").str.lower()
    _fail_first(
        path,
        df.assign(preemptible=pre_raw),
        ~pre_raw.isin(list(_TRUE | _FALSE)),
        "preemptible",
        "expected true or false",
    )
    status = text("status", "ok").str.lower()
    _fail_first(
        path,
        df.assign(status=status),
        ~status.isin(["ok", "failed", "cancelled"]),
        "status",
        "expected ok, failed or cancelled",
    )
    est = None
    if "est_runtime" in df.columns:
        raw = df["est_runtime"].str.strip()
        est = pd.to_numeric(raw, errors="coerce")
        bad = (raw != "") & (est.isna() | ~est.fillna(1).map(_finite) | (est.fillna(1) <= 0))
        _fail_first(path, df, bad, "est_runtime", "expected a positive number of seconds, or nothing")
    ids = df["job_id"].str.strip() if "job_id" in df.columns else None
    if ids is not None:
        dup = ids.duplicated() & (ids != "")
        _fail_first(path, df, dup, "job_id", "job ids must be unique")

    keep, skipped = _gpu_work(path, duration, gpus)
    jobs = []
    for i in range(len(df)):
        if not keep[i]:
            continue
        jid = ids.iat[i] if ids is not None and ids.iat[i] else f"job-{i}"
        e = None if est is None or pd.isna(est.iat[i]) else float(est.iat[i])
        jobs.append(
            TraceJob(
                id=jid,
                submit=float(submit.iat[i]),
                duration=float(duration.iat[i]),
                gpus=int(gpus.iat[i]),
                tenant=tenant.iat[i],
                priority=names[prio_raw.iat[i]] if "priority" in df.columns else None,
                preemptible=(pre_raw.iat[i] in _TRUE) if "preemptible" in df.columns else None,
                status=status.iat[i],
                est_runtime=e,
            )
        )
    return Trace(_sorted(jobs), origin=origin, skipped=skipped, source=str(path), format="csv")


TRACE_FORMATS: dict[str, Callable[[str | Path], Trace]] = {
    "philly": load_philly,
    "alibaba-2023": load_alibaba_2023,
    "csv": load_csv,
}


def load_trace(fmt: str, path: str | Path) -> Trace:
    try:
        loader = TRACE_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown trace format {fmt!r}; use one of {', '.join(TRACE_FORMATS)}") from None
    return loader(path)


# --- node lists --------------------------------------------------------------------------------
def load_philly_machines(path: str | Path, pool: str = "default") -> list[NodeSpec]:
    """Philly machine lists: ``cluster_machine_list.csv`` (machineId, number of GPUs, single GPU
    mem; leading spaces) or ``revised_machine_list.csv``. Machines with 0 GPUs are left out."""
    df = _read(path, skipinitialspace=True)
    df.columns = [str(c).strip() for c in df.columns]
    _require_columns(path, df, ["machineId", "number of GPUs"])
    gpus = _whole(path, df, "number of GPUs", minimum=0, why="expected a whole number of GPUs")
    names = df["machineId"].astype(str).str.strip()
    _fail_first(path, df, names.duplicated(), "machineId", "machine ids must be unique")
    return [NodeSpec(n, int(g), pool) for n, g in zip(names, gpus, strict=True) if g > 0]


def load_alibaba_nodes(path: str | Path, pool: str = "default") -> list[NodeSpec]:
    """Alibaba 2023 node lists (sn, cpu_milli, memory_mib, gpu, model); CPU-only nodes left out."""
    df = _read(path, dtype={"sn": str, "model": str})
    _require_columns(path, df, ["sn", "gpu"])
    gpus = _whole(path, df, "gpu", minimum=0, why="expected a whole number of GPUs")
    names = df["sn"].astype(str).str.strip()
    _fail_first(path, df, names.duplicated(), "sn", "node names must be unique")
    return [NodeSpec(n, int(g), pool) for n, g in zip(names, gpus, strict=True) if g > 0]


NODE_FORMATS: dict[str, Callable[..., list[NodeSpec]]] = {
    "philly-machines": load_philly_machines,
    "alibaba-nodes": load_alibaba_nodes,
}


def load_nodes(fmt: str, path: str | Path, pool: str = "default") -> list[NodeSpec]:
    try:
        loader = NODE_FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown node-list format {fmt!r}; use one of {', '.join(NODE_FORMATS)}") from None
    return loader(path, pool=pool)
