"""`/gpusched/metrics` in the Prometheus text exposition format."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from ..core import JobState
from ..service.interactive import kernel_usage

if TYPE_CHECKING:  # pragma: no cover
    from ..service import Service


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_metrics(service: Service) -> str:
    s = service.scheduler
    c = s.cluster
    lines: list[str] = []

    def metric(name: str, kind: str, help_: str, samples: list[tuple[dict[str, str], float]]) -> None:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            lab = ",".join(f'{k}="{_esc(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{lab}}} {value}" if lab else f"{name} {value}")

    fenced = sum(len(c.fenced_on(n)) for n in c.node_names)
    metric("gpusched_gpus_total", "gauge", "GPUs in the cluster.", [({}, c.total_gpus)])
    metric("gpusched_gpus_allocated", "gauge", "GPUs allocated to jobs.", [({}, c.total_gpus - c.free_gpus - fenced)])
    metric("gpusched_gpus_fenced", "gauge", "GPUs kept out of placement by health checks.", [({}, fenced)])
    by_state = Counter((j.state.value, j.tenant, j.spec.priority.label) for j in s.jobs.values())
    metric(
        "gpusched_jobs",
        "gauge",
        "Jobs by state, tenant and priority.",
        [({"state": st, "tenant": t, "priority": p}, n) for (st, t, p), n in sorted(by_state.items())],
    )
    q = s.queues_view()
    metric(
        "gpusched_tenant_quota_gpus",
        "gauge",
        "Guaranteed GPUs per tenant.",
        [({"tenant": t}, v["quota"]) for t, v in q.items()],
    )
    metric(
        "gpusched_tenant_used_gpus",
        "gauge",
        "GPUs in use per tenant.",
        [({"tenant": t}, v["used"]) for t, v in q.items()],
    )
    metric(
        "gpusched_tenant_borrowed_gpus",
        "gauge",
        "GPUs borrowed beyond quota per tenant.",
        [({"tenant": t}, v["borrowed"]) for t, v in q.items()],
    )
    metric(
        "gpusched_tenant_queued_gpus",
        "gauge",
        "GPUs requested by queued jobs per tenant.",
        [({"tenant": t}, v["queued_gpus"]) for t, v in q.items()],
    )
    preempted = sum(j.preemptions for j in s.jobs.values())
    metric("gpusched_preemptions_total", "counter", "Preemptions since the store began.", [({}, preempted)])
    ended = Counter(j.state.value for j in s.jobs.values() if j.state.terminal)
    metric(
        "gpusched_jobs_finished_total",
        "counter",
        "Jobs that ended, by final state.",
        [
            ({"state": st.value}, ended.get(st.value, 0))
            for st in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
        ],
    )
    _stall_metrics(service, metric)
    _interactive_metrics(service, metric)
    return "\n".join(lines) + "\n"


def _stall_metrics(service: Service, metric: Any) -> None:
    """The stall watch (docs/stalls.md): stalled and data-starved jobs now, stalls since start, GPU-hours."""
    s, info = service.scheduler, service.info
    running = [info[j.id] for j in s.active.values() if j.state is JobState.RUNNING and j.id in info]
    metric(
        "gpusched_jobs_stalled",
        "gauge",
        "Running jobs that show no progress for their stall_timeout.",
        [({}, sum(1 for i in running if i.stalled_since is not None))],
    )
    metric(
        "gpusched_jobs_waiting_on_data",
        "gauge",
        "Running jobs whose GPUs are nearly idle while their processes are busy on CPU or storage I/O.",
        [({}, sum(1 for i in running if i.waiting_on_data is not None))],
    )
    metric(
        "gpusched_stalls_total",
        "counter",
        "Jobs found stalled since the server started, by what on_stall did.",
        [({"action": a}, service.stalls.stalls.get(a, 0)) for a in ("alerted", "requeued", "failed")],
    )
    hours = service.gpu_hours_by_tenant()
    for name, key, help_ in (
        ("gpusched_tenant_reported_gpu_hours", "allocated", "Allocated GPU-hours that progress reports cover."),
        ("gpusched_tenant_idle_gpu_hours", "idle", "Of those, GPU-hours with the GPUs idle."),
        ("gpusched_tenant_data_wait_gpu_hours", "waiting_on_data", "Of those, GPU-hours spent waiting on data."),
    ):
        metric(name, "counter", help_, [({"tenant": t}, v[key]) for t, v in sorted(hours.items())])


def _interactive_metrics(service: Service, metric: Any) -> None:
    """GPU kernels (docs/interactive.md): GPU-hours held vs executing, idle GPU-hours reclaimed, per user."""
    usage = sorted(kernel_usage(service.scheduler.jobs.values(), service.info, service.clock()).items())
    for name, key, help_ in (
        ("gpusched_interactive_held_gpu_hours", "held", "GPU-hours held by GPU kernels."),
        ("gpusched_interactive_executing_gpu_hours", "executing", "Of those, GPU-hours with the kernel executing."),
        (
            "gpusched_interactive_reclaimed_idle_gpu_hours",
            "reclaimed_idle",
            "GPU-hours that kernels given back by idle reclaim had sat idle.",
        ),
        ("gpusched_interactive_reclaims_total", "reclaims", "GPU kernels shut down by idle reclaim."),
    ):
        metric(name, "counter", help_, [({"user": u}, v[key]) for u, v in usage])


def render_scaling_metrics(rec: dict[str, Any]) -> str:
    """A pool-size recommendation (`Advisor.recommend`) in the Prometheus text format."""
    pools = rec["pools"]
    lines = [
        "# HELP gpusched_pool_nodes Nodes in each pool now.",
        "# TYPE gpusched_pool_nodes gauge",
        *(f'gpusched_pool_nodes{{pool="{_esc(p["name"])}"}} {p["nodes"]}' for p in pools),
        "# HELP gpusched_pool_recommended_nodes Nodes each pool should have (forecast upper edge over the lead time).",
        "# TYPE gpusched_pool_recommended_nodes gauge",
        *(f'gpusched_pool_recommended_nodes{{pool="{_esc(p["name"])}"}} {p["recommended_nodes"]}' for p in pools),
        "# HELP gpusched_demand_forecast_peak_gpus Largest forecast upper edge over the lead time.",
        "# TYPE gpusched_demand_forecast_peak_gpus gauge",
        f"gpusched_demand_forecast_peak_gpus {rec['forecast_peak_gpus']}",
        "# HELP gpusched_spot_share Share of the wanted GPUs meant for spot pools (configured, or learnt: spot_share auto).",
        "# TYPE gpusched_spot_share gauge",
        f"gpusched_spot_share {rec['spot_share']}",
    ]
    return "\n".join(lines) + "\n"
