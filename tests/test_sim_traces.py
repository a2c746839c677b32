"""Trace loaders: the real files in ../shared/traces (row counts, types) and clear errors
for malformed user traces (which line, which column, why)."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest

from jupyter_gpusched.core.model import Priority
from jupyter_gpusched.sim.traces import (
    TraceError,
    load_alibaba_2023,
    load_alibaba_nodes,
    load_csv,
    load_philly,
    load_philly_machines,
    load_trace,
)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TRACES = PROJECT_ROOT / ".." / "shared" / "traces"
needs_traces = pytest.mark.skipif(
    not TRACES.is_dir(),
    reason=f"GPU-cluster traces not found at {TRACES} (expected ../shared/traces beside the project root)",
)
PHILLY = TRACES / "microsoft_philly_2017"
ALIBABA = TRACES / "alibaba_gpu_v2023"


# --- the real files --------------------------------------------------------------------------------
@needs_traces
def test_philly_table_loads_every_job_with_vc_as_tenant():
    tr = load_philly(PHILLY / "philly_jobs_pollux.csv.gz")
    assert len(tr) == 82_247
    assert tr.format == "philly" and tr.origin.isoformat() == "2017-09-04T10:30:41"
    subs = [j.submit for j in tr.jobs]
    assert subs == sorted(subs) and subs[0] == 0.0
    assert Counter(j.gpus for j in tr.jobs) == {
        1: 76_627, 2: 1_818, 4: 1_870, 8: 1_643, 16: 199, 32: 67, 12: 7, 24: 7, 64: 6, 128: 3,
    }  # fmt: skip
    tenants = Counter(j.tenant for j in tr.jobs)
    assert len(tenants) == 15 and tenants["6214e9"] == 41_226 and tenants["795a4c"] == 3
    j = next(j for j in tr.jobs if j.tenant == "ee9e8c" and j.duration == 193_256.0)  # the README's example job
    assert j.gpus == 8 and isinstance(j.submit, float) and j.priority is None and j.preemptible is None
    assert len({j.id for j in tr.jobs}) == len(tr)


@needs_traces
def test_philly_window_selection_by_wall_clock():
    tr = load_philly(PHILLY / "philly_jobs_pollux.csv.gz")
    start, end = tr.to_seconds("2017-10-14 18:00:00"), tr.to_seconds("2017-10-15 18:00:00")
    sub = tr.select(start=start, end=end, tenants=["11cb48", "6214e9", "ed69ec", "ee9e8c"], max_gpus=6)
    assert len(sub) == 295
    assert all(start <= j.submit < end and j.gpus <= 6 for j in sub.jobs)
    assert sum(sub.skipped.values()) == len(tr) - 295


@needs_traces
def test_alibaba_pods_become_jobs_with_qos_priority_status_and_gpu_share():
    tr = load_alibaba_2023(ALIBABA / "openb_pod_list_default.csv.gz")
    assert tr.skipped == {"CPU-only pods": 1_088, "zero-length pods": 1}
    assert len(tr) == 8_152 - 1_088 - 1
    assert Counter(j.status for j in tr.jobs) == {"ok": 4_334, "failed": 1_869, "cancelled": 860}
    assert Counter(j.gpus for j in tr.jobs) == {1: 6_989 - 1, 2: 16, 4: 15, 8: 44}
    prio = Counter(j.priority for j in tr.jobs)
    assert set(prio) == {Priority.HIGH, Priority.NORMAL, Priority.LOW}
    assert all(j.preemptible == (j.tenant == "be") for j in tr.jobs)
    assert all(j.priority is Priority.LOW for j in tr.jobs if j.tenant == "be")
    fractions = [j.gpu_fraction for j in tr.jobs]
    assert min(fractions) > 0 and max(fractions) == 1.0 and sum(f < 1 for f in fractions) > 3_000
    assert tr.origin is None and all(j.duration > 0 for j in tr.jobs)


@needs_traces
def test_node_lists():
    philly = load_philly_machines(PHILLY / "cluster_machine_list.csv", pool="p")
    assert len(philly) == 552 and sum(n.gpus for n in philly) == 2_490 and {n.pool for n in philly} == {"p"}
    revised = load_philly_machines(PHILLY / "revised_machine_list.csv")
    assert len(revised) == 552 - 13 and sum(n.gpus for n in revised) == 3_205  # 13 machines with 0 GPUs left out
    gpu_nodes = load_alibaba_nodes(ALIBABA / "openb_node_list_gpu_node.csv.gz")
    assert len(gpu_nodes) == 1_213 and sum(n.gpus for n in gpu_nodes) == 6_212
    all_nodes = load_alibaba_nodes(ALIBABA / "openb_node_list_all_node.csv.gz")
    assert len(all_nodes) == 1_523 - 310  # CPU-only nodes left out


# --- the plain CSV format ------------------------------------------------------------------------------
def write(tmp_path: Path, text: str, name="t.csv") -> Path:
    p = tmp_path / name
    if name.endswith(".gz"):
        p.write_bytes(gzip.compress(text.encode()))
    else:
        p.write_text(text)
    return p


def test_plain_csv_round_trip(tmp_path):
    p = write(
        tmp_path,
        "submit_time,duration,gpus,tenant,priority,preemptible,job_id,est_runtime\n"
        "30,600,2,vision,high,false,a,700\n"
        "0,60,1,nlp,low,yes,b,\n"
        "10,5.5,8,,,,c,\n",
        "t.csv.gz",
    )
    tr = load_trace("csv", p)
    assert [j.id for j in tr.jobs] == ["b", "c", "a"]  # sorted by submit time
    b, c, a = tr.jobs
    assert (a.gpus, a.tenant, a.priority, a.preemptible, a.est_runtime) == (2, "vision", Priority.HIGH, False, 700.0)
    assert (b.priority, b.preemptible) == (Priority.LOW, True)
    assert (c.tenant, c.priority, c.preemptible, c.duration) == ("default", Priority.NORMAL, False, 5.5)


def test_plain_csv_with_iso_times_and_only_required_columns(tmp_path):
    p = write(tmp_path, "submit_time,duration,gpus\n2024-01-31T12:00:00,60,1\n2024-01-31T13:30:00,60,2\n")
    tr = load_csv(p)
    assert [j.submit for j in tr.jobs] == [0.0, 5400.0]
    assert tr.origin.isoformat() == "2024-01-31T12:00:00"
    assert tr.jobs[0].priority is None and tr.jobs[0].preemptible is None  # the scenario decides


@pytest.mark.parametrize(
    ("text", "line", "column", "why"),
    [
        ("submit_time,duration,gpus\n0,60,1\n5,60,1.5\n", 3, "gpus", "whole number"),
        ("submit_time,duration,gpus\n0,60,-1\n", 2, "gpus", "0 or more"),
        ("submit_time,duration,gpus\n0,-3,1\n", 2, "duration", "0 seconds or more"),
        ("submit_time,duration,gpus\n0,abc,1\n", 2, "duration", "seconds"),
        ("submit_time,duration,gpus,priority\n0,60,1,urgent\n", 2, "priority", "high, normal or low"),
        ("submit_time,duration,gpus,preemptible\n0,60,1,maybe\n", 2, "preemptible", "true or false"),
        ("submit_time,duration,gpus\n0,60,1\nyesterday,60,1\n", 3, "submit_time", "seconds like the rows above"),
        (
            "submit_time,duration,gpus\n2024-01-01T00:00,60,1\n7,60,1\n",
            3,
            "submit_time",
            "date-time like the rows above",
        ),
        ("submit_time,duration,gpus\nsoon,60,1\n", 2, "submit_time", "seconds or an ISO 8601"),
        ("submit_time,duration,gpus,job_id\n0,60,1,x\n1,60,1,x\n", 3, "job_id", "unique"),
        ("submit_time,duration,gpus,status\n0,60,1,lost\n", 2, "status", "ok, failed or cancelled"),
        ("submit_time,duration\n0,60\n", 1, None, "missing column(s) gpus"),
        # issue 12, fault 6: an extra field in the first row used to read as a bad gpus value
        ("submit_time,duration,gpus\n0,60,1,oops\n5,60,2\n", 2, None, "4 fields where the header names 3: 1 extra"),
        ("submit_time,duration,gpus\n0,60,1\n5,60,2,x,y\n", 3, None, "2 extra fields"),
    ],
)
def test_malformed_csv_names_line_column_and_reason(tmp_path, text, line, column, why):
    with pytest.raises(TraceError) as err:
        load_csv(write(tmp_path, text))
    e = err.value
    assert e.line == line and e.column == column
    assert why in str(e) and f"line {line}" in str(e) and "t.csv" in str(e)


def test_cpu_only_and_zero_length_jobs_are_left_out_and_counted(tmp_path):
    """A real job log has CPU-only jobs and jobs that ended at once; they hold no GPU time, so
    they are left out (ids keep their rows), counted, and shown in the report, not refused."""
    text = "submit_time,duration,gpus\n0,60,1\n5,60,0\n7,0,2\n9,30,4\n11,0,0\n"
    tr = load_csv(write(tmp_path, text))
    assert [j.id for j in tr.jobs] == ["job-0", "job-3"]
    assert tr.skipped == {"CPU-only jobs": 2, "zero-length jobs": 1}
    philly = "timestamp,duration,num_gpus,gpu_time,cluster\n"
    philly += "2017-10-09 07:00:00,60,1,60,a\n2017-10-09 07:01:00,0,1,0,a\n2017-10-09 07:02:00,60,0,0,b\n"
    tr = load_philly(write(tmp_path, philly))
    assert [j.id for j in tr.jobs] == ["philly-0"] and tr.skipped == {"CPU-only jobs": 1, "zero-length jobs": 1}
    with pytest.raises(TraceError, match=r"no GPU jobs to replay \(1 CPU-only jobs, 1 zero-length jobs\)"):
        load_csv(write(tmp_path, "submit_time,duration,gpus\n0,60,0\n1,0,1\n"))


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(TraceError, match="file not found"):
        load_csv(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match="empty"):
        load_csv(write(tmp_path, ""))
    with pytest.raises(TraceError, match="only a header"):
        load_csv(write(tmp_path, "submit_time,duration,gpus\n"))
    with pytest.raises(ValueError, match="unknown trace format"):
        load_trace("parquet", tmp_path / "x")


def test_malformed_philly_row(tmp_path):
    p = write(
        tmp_path,
        "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-13-09 06:13:03,5,1,5,ab\n",
    )
    with pytest.raises(TraceError) as err:
        load_philly(p)
    assert err.value.line == 3 and err.value.column == "timestamp" and "YYYY-MM-DD" in str(err.value)


def test_malformed_alibaba_row(tmp_path):
    head = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
    p = write(tmp_path, head + "p0,1,1,1,1000,,LS,Running,0,10,0\np1,1,1,1,1000,,LS,Running,5,10,\n")
    with pytest.raises(TraceError) as err:
        load_alibaba_2023(p)
    assert err.value.line == 3 and err.value.column == "scheduled_time"
    p = write(tmp_path, head + "p0,1,1,1,1000,,XX,Running,0,10,0\n")
    with pytest.raises(TraceError, match="column 'qos'"):
        load_alibaba_2023(p)
