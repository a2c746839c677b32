"""Figures of one replay, and the limits no policy can beat.

Definitions (all times in seconds, from the first submit in the replay, t0):
- utilization: GPU-seconds allocated / GPU-seconds provisioned, over [t0, end of run];
  utilization_net: the same less the GPU-seconds spent writing and restoring checkpoints;
- goodput: useful GPU-seconds (each completed job's duration x GPUs) / provisioned;
- gpu_busy: GPU share really used (the trace's gpu_fraction x allocated time) / provisioned,
  only where the trace says (Alibaba 2023's gpu_milli); None elsewhere;
- JCT: end - submit of each completed (succeeded or failed) job; wait: first start - submit;
- makespan: last completed job's end - t0;
- cost_total: every provisioned node's GPUs x its pool's price x the time it was up;
  cost_per_job: cost_total / completed jobs; cost_spot: the part of cost_total on spot pools;
  cost_by_tenant_allocated: the GPU-seconds each tenant's jobs held x the price of their
  pool (core.cost: what a tenant is charged; idle capacity is in cost_total only);
- jain_fairness: Jain's index over tenants of each tenant's mean (duration / JCT);
- low_priority_overtaken: low-priority jobs that a job of the same tenant, submitted more
  than the aging bound after them and asking at least as many GPUs, started before (the
  queue's aging rule promises this never happens, backfill of smaller jobs aside);
- gpu_hours_lost: work preempted or interrupted jobs threw away (since their last checkpoint);
  gpu_hours_overhead: checkpoint writes and restores.
Bounds: makespan >= max(total GPU-hours / capacity, max over jobs of submit - t0 + duration);
avg JCT >= mean duration (each job alone, on an empty cluster); on a fixed cluster, goodput
<= total GPU-hours / (capacity x the makespan bound).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

import numpy as np

from ..core.cost import tenant_costs
from ..core.model import Priority
from ..core.queues import starvation_bound
from .results import JobRecord, SimResult

COMPLETED = ("SUCCEEDED", "FAILED")


def _pct(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if values.size else None


def _mean(values: np.ndarray) -> float | None:
    return float(values.mean()) if values.size else None


def jain(values: Iterable[float]) -> float | None:
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if x.size == 0 or not (x**2).sum() > 0:
        return None
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def bounds(jobs: Sequence[JobRecord], capacity: int, t0: float | None = None) -> dict:
    """Lower bounds for the completed jobs in `jobs` on `capacity` GPUs."""
    done = [j for j in jobs if j.status != "cancelled"]
    if not done or capacity <= 0:
        return {"makespan_s": None, "avg_jct_s": None, "jobs": len(done), "capacity_gpus": capacity}
    t0 = min(j.submit for j in jobs) if t0 is None else t0
    work = sum(j.duration * j.gpus for j in done)
    makespan = max(work / capacity, max(j.submit - t0 + j.duration for j in done))
    return {
        "makespan_s": makespan,
        "avg_jct_s": sum(j.duration for j in done) / len(done),
        # no policy on a fixed cluster of `capacity` GPUs does more useful work per GPU provisioned
        "goodput_max": work / (capacity * makespan) if makespan > 0 else None,
        "work_gpu_hours": work / 3600.0,
        "capacity_gpus": capacity,
        "jobs": len(done),
    }


def size_class(gpus: int) -> str:
    """Job sizes in powers of two ("1", "2", "3-4", "5-8", ...): where large jobs wait far longer
    than small ones (whole nodes must drain for them), the table by size shows it."""
    if gpus <= 2:
        return str(max(gpus, 1))
    hi = 1 << (gpus - 1).bit_length()
    return f"{hi // 2 + 1}-{hi}"


def _group_waits(recs: Sequence[JobRecord], key) -> dict:
    groups: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        if r.first_start is not None:
            groups[key(r)].append(r.first_start - r.submit)
    out = {}
    for k in sorted(groups):
        w = np.asarray(groups[k])
        out[k] = {
            "jobs": int(w.size),
            "avg_s": float(w.mean()),
            "p50_s": _pct(w, 50),
            "p99_s": _pct(w, 99),
            "max_s": float(w.max()),
        }
    return out


def overtaken(recs: Sequence[JobRecord], bound: float) -> int:
    """Low-priority jobs started after a same-tenant job at least as large that was
    submitted more than `bound` later (see the module doc)."""
    by_tenant: dict[str, list[JobRecord]] = defaultdict(list)
    for r in recs:
        if r.first_start is not None:
            by_tenant[r.tenant].append(r)
    count = 0
    for rs in by_tenant.values():
        rs.sort(key=lambda r: r.submit)
        submits = np.asarray([r.submit for r in rs])
        starts = np.asarray([r.first_start for r in rs])
        gpus = np.asarray([r.gpus for r in rs])
        suffix_min: dict[int, np.ndarray] = {}
        for g in sorted(set(int(x) for x in gpus)):
            s = np.where(gpus >= g, starts, np.inf)
            suffix_min[g] = np.minimum.accumulate(s[::-1])[::-1]
        for r in rs:
            if r.priority is not Priority.LOW:
                continue
            k = int(np.searchsorted(submits, r.submit + bound, side="right"))
            if k < len(rs) and suffix_min[r.gpus][k] < r.first_start:
                count += 1
    return count


def _end(r: JobRecord) -> float:
    assert r.end is not None, f"{r.id} completed without an end"
    return r.end


def summarize(res: SimResult, aging_interval: float = 3600.0) -> dict:
    recs = res.jobs
    done = [r for r in recs if r.state in COMPLETED]
    jct = np.asarray([_end(r) - r.submit for r in done], dtype=float)
    waits = np.asarray([r.first_start - r.submit for r in recs if r.first_start is not None], dtype=float)
    low_waits = [r.first_start - r.submit for r in recs if r.priority is Priority.LOW and r.first_start is not None]
    makespan = (max(_end(r) for r in done) - res.start) if done else 0.0
    span = res.end - res.start
    prov = res.provisioned_gpu_s
    useful = sum(r.duration * r.gpus for r in done)
    cost_total = sum(res.cost_by_pool.values())
    by_tenant: dict[str, list[float]] = defaultdict(list)
    for r in done:
        by_tenant[r.tenant].append(r.duration / (_end(r) - r.submit) if _end(r) > r.submit else 1.0)
    b = bounds(done, res.capacity_max, res.start)
    overhead = sum(r.overhead_gpu_s for r in recs)
    out = {
        "jobs": len(done),
        "submitted": len(recs),
        "succeeded": sum(r.state == "SUCCEEDED" for r in recs),
        "failed": sum(r.state == "FAILED" for r in recs),
        "cancelled": sum(r.state == "CANCELLED" for r in recs),
        "rejected": sum(r.state == "REJECTED" for r in recs),
        "unfinished": sum(r.state not in COMPLETED + ("CANCELLED", "REJECTED") for r in recs),
        "utilization": res.allocated_gpu_s / prov if prov > 0 else None,
        "utilization_net": (res.allocated_gpu_s - overhead) / prov if prov > 0 else None,
        "goodput": useful / prov if prov > 0 else None,
        "gpu_busy": (res.busy_gpu_s / prov if prov > 0 else None) if res.busy_gpu_s is not None else None,
        "avg_jct_s": _mean(jct),
        "p50_jct_s": _pct(jct, 50),
        "p99_jct_s": _pct(jct, 99),
        "avg_wait_s": _mean(waits),
        "p50_wait_s": _pct(waits, 50),
        "p99_wait_s": _pct(waits, 99),
        "max_wait_s": float(waits.max()) if waits.size else None,
        "wait_by_tenant": _group_waits(recs, lambda r: r.tenant),
        "wait_by_priority": _group_waits(recs, lambda r: r.priority.label),
        "wait_by_size": _group_waits(recs, lambda r: size_class(r.gpus)),
        "max_low_priority_wait_s": max(low_waits) if low_waits else None,
        "aging_bound_s": starvation_bound(Priority.LOW, aging_interval),
        "low_priority_overtaken": overtaken(recs, starvation_bound(Priority.LOW, aging_interval)),
        "makespan_s": makespan,
        "span_s": span,
        "cost_total": cost_total,
        "cost_per_job": cost_total / len(done) if done else None,
        "cost_by_pool": dict(res.cost_by_pool),
        "cost_spot": res.prices.spot_part(res.cost_by_pool),
        "cost_by_tenant_allocated": tenant_costs((r.tenant, r.cost) for r in recs),
        "jain_fairness": jain(float(np.mean(v)) for v in by_tenant.values()),
        "preemptions": sum(r.preemptions for r in recs),
        "interruptions": sum(r.interruptions for r in recs),
        "spot_node_losses": res.interruptions,
        "gpu_hours_lost": sum(r.lost_gpu_s for r in recs) / 3600.0,
        "gpu_hours_overhead": overhead / 3600.0,
        "gpu_hours_allocated": res.allocated_gpu_s / 3600.0,
        "gpu_hours_provisioned": prov / 3600.0,
        "capacity_gpus": res.capacity_initial,
        "capacity_max_gpus": res.capacity_max,
        "bounds": b,
        "stuck": res.stuck,
        "wall_s": res.wall_s,
        "events": res.event_count,
        "events_by_kind": dict(res.events),
        "events_per_s": res.events_per_s,
        "scheduler_passes": res.scheduler_passes,
        "transitions": res.transitions,
    }
    return out


def compare_on_common_jobs(a: SimResult, b: SimResult) -> dict:
    """JCT of `a` over `b` on the jobs both completed: when one policy rejects jobs (larger
    than a partition) or leaves them unfinished, its averages cover an easier job set."""
    ends_b = {r.id: _end(r) - r.submit for r in b.jobs if r.state in COMPLETED}
    pairs = [(_end(r) - r.submit, ends_b[r.id]) for r in a.jobs if r.state in COMPLETED and r.id in ends_b]
    only_a = sum(r.state in COMPLETED for r in a.jobs) - len(pairs)
    out: dict = {"jobs": len(pairs), "only_this": only_a, "only_ref": len(ends_b) - len(pairs)}
    out["job_sets_differ"] = bool(only_a or out["only_ref"])
    if pairs:
        ja, jb = np.asarray(pairs, dtype=float).T
        out["avg_jct_s"] = float(ja.mean() / jb.mean()) if jb.mean() > 0 else None
        p_b = float(np.percentile(jb, 99))
        out["p99_jct_s"] = float(np.percentile(ja, 99)) / p_b if p_b > 0 else None
    return out


def check_bounds(summary: dict, tolerance: float = 1e-6) -> list[str]:
    """Which lower bounds a policy's figures break (there should be none)."""
    b = summary["bounds"]
    bad = []
    if b.get("makespan_s") is not None and summary["makespan_s"] < b["makespan_s"] * (1 - tolerance) - tolerance:
        bad.append(f"makespan {summary['makespan_s']:.1f}s below the bound {b['makespan_s']:.1f}s")
    if b.get("avg_jct_s") is not None and summary["avg_jct_s"] is not None:
        if summary["avg_jct_s"] < b["avg_jct_s"] * (1 - tolerance) - tolerance:
            bad.append(f"avg JCT {summary['avg_jct_s']:.1f}s below the bound {b['avg_jct_s']:.1f}s")
    return bad
