"""What each server command does: one function per command, over the one client."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from ..client import Client
from ..core.model import TERMINAL_STATE_NAMES
from .options import spec_from_args

TERMINAL = TERMINAL_STATE_NAMES


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]

    def line(row: list[str]) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()

    return "\n".join([line(header)] + [line(r) for r in rows])


def _job_line(j: dict[str, Any]) -> list[str]:
    progress = j.get("progress")
    return [
        j["id"],
        j["state"],
        j["priority"],
        str(j["gpus"]),
        j["tenant"],
        f"{progress[0]}/{progress[1]}" if progress else "",
        j["notebook"],
    ]


def _json(value: Any, out: TextIO) -> None:
    print(json.dumps(value, indent=2), file=out)


def follow(client: Client, job_id: str, out: TextIO = sys.stdout) -> dict[str, Any]:
    """Print the job's log as it grows until the job ends; return the ended job."""
    offset = 0
    while True:
        job = client.get(job_id)
        text, offset = client.log(job_id, offset)
        if text:
            out.write(text)
            out.flush()
        if job["state"] in TERMINAL:
            return job
        time.sleep(1.0)


def submit(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    job = client.submit(args.notebook, **spec_from_args(args))
    if args.json:
        _json(job, out)
    else:
        where = f", position {job['position'] + 1} in line" if job.get("position") is not None else ""
        print(f"submitted {job['id']}: {job['state']}{where}", file=out)
    if args.wait:
        job = follow(client, job["id"], out)
        print(f"\n{job['id']} {job['state']}: {job.get('reason', '')}", file=out)
        return 0 if job["state"] == "SUCCEEDED" else 1
    return 0


def list_jobs(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    jobs = client.jobs(state=args.state, tenant=args.tenant, mine=args.mine)
    if args.json:
        _json(jobs, out)
    elif not jobs:
        print("no jobs", file=out)
    else:
        print(
            _table([_job_line(j) for j in jobs], ["ID", "STATE", "PRIORITY", "GPUS", "TENANT", "CELLS", "NOTEBOOK"]),
            file=out,
        )
    return 0


_STATUS_KEYS = (
    "id",
    "state",
    "notebook",
    "gpus",
    "priority",
    "tenant",
    "owner",
    "created",
    "started",
    "finished",
    "reason",
    "message",
)


def status(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    job = client.get(args.job_id)
    events = client.events(args.job_id)
    if args.json:
        _json(dict(job, events=events), out)
        return 0
    for key in _STATUS_KEYS:
        if job.get(key) not in (None, ""):
            print(f"{key:>15}: {job[key]}", file=out)
    if job.get("position") is not None:
        print(f"{'position':>15}: {job['position'] + 1}", file=out)
        print(
            f"{'estimated start':>15}: {job.get('estimated_start') or 'unknown (it waits on jobs with no runtime limit or learned estimate, or is far back in line)'}",
            file=out,
        )
    expected = expected_run(job.get("runtime_estimate"))
    if expected and job["state"] not in TERMINAL:
        print(f"{'expected run':>15}: {expected}", file=out)
    if job.get("allocation"):
        print(f"{'gpus on':>15}: " + ", ".join(f"{a['node']}:{a['gpus']}" for a in job["allocation"]), file=out)
    print("history:", file=out)
    for e in events:
        print(f"  {e['time']}  {e['from'] or '-':>9} -> {e['to']:<9} {e['reason']} ({e['actor']})", file=out)
    return 0


_BASIS_WORDS = {
    "owner+notebook+gpus": "this notebook",
    "owner+notebook": "this notebook on other GPU counts",
    "tenant+gpus": "this tenant's jobs of as many GPUs",
    "tenant": "this tenant's jobs",
}


def _minutes(seconds: float) -> str:
    if seconds >= 5400:
        return f"~{seconds / 3600:.1f} h"
    return f"~{max(1, round(seconds / 60))} min"


def expected_run(estimate: dict[str, Any] | None) -> str:
    """ "~12 min (learned from 5 runs of this notebook)", "~1 h (max_runtime)", or "" when unknown."""
    if not estimate or estimate.get("seconds") is None:
        return ""
    when = _minutes(float(estimate["seconds"]))
    if estimate.get("source") == "learned":
        n = estimate.get("samples")
        runs = f"{n} runs" if n else "earlier runs"
        return f"{when} (learned from {runs} of {_BASIS_WORDS.get(estimate.get('basis') or '', 'jobs like it')})"
    return f"at most {when} (its max_runtime)"


def cancel(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    job = client.cancel(args.job_id)
    print(f"{job['id']}: {job['state']}", file=out)
    return 0


def logs(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if args.follow:
        follow(client, args.job_id, out)
    else:
        out.write(client.log(args.job_id)[0])
    return 0


def output_name(job: dict[str, Any]) -> str:
    """`train.3f2a9c1b7e4d.ipynb`: the notebook's name and the job's id (the lab's Download uses it too)."""
    stem = str(job.get("notebook") or "job").replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".ipynb")
    return f"{stem}.{job['id']}.ipynb"


def output(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    data = client.output(args.job_id)
    path = args.out or output_name(client.get(args.job_id))
    with open(path, "wb") as f:
        f.write(data)
    print(f"wrote {path}", file=out)
    return 0


def queues(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    q = client.queues()
    if args.json:
        _json(q, out)
        return 0
    rows = [
        [
            t,
            str(v["quota"]),
            "any" if v["burst"] is None else str(v["burst"]),
            str(v["used"]),
            str(v["borrowed"]),
            str(v["queued"]),
            str(v["running"]),
        ]
        for t, v in q["queues"].items()
    ]
    print(f"policy: {q['policy']}", file=out)
    print(_table(rows, ["TENANT", "QUOTA", "BURST", "USED", "BORROWED", "QUEUED", "RUNNING"]), file=out)
    return 0


def cluster(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    c = client.cluster()
    if args.json:
        _json(c, out)
        return 0
    print(
        f"{c['backend']} backend, {c['policy']} policy: {c['allocated_gpus']}/{c['total_gpus']} GPUs allocated ({c['utilization']:.0%})",
        file=out,
    )
    rows = [[n["name"], n["pool"], str(n["gpus"]), str(n["free"]), ",".join(n["jobs"])] for n in c["nodes"]]
    print(_table(rows, ["NODE", "POOL", "GPUS", "FREE", "JOBS"]), file=out)
    return 0


def forecast(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    usage = client.usage(args.minutes)
    prediction = client.forecast()
    if args.json:
        _json({"usage": usage, "forecast": prediction}, out)
        return 0
    rows = []
    for tenant, s in sorted(usage["tenants"].items()):
        req, alloc = s["requested"], s["allocated"]
        rows.append(
            [tenant, str(req[-1]), str(max(req)), f"{sum(req) / len(req):.1f}", str(alloc[-1]), str(max(alloc))]
        )
    span = f"{len(usage['minutes'])} minutes recorded" if usage["minutes"] else "no history yet"
    print(f"GPU demand, last {args.minutes} min ({span}):", file=out)
    if rows:
        print(_table(rows, ["TENANT", "REQ NOW", "REQ PEAK", "REQ MEAN", "ALLOC NOW", "ALLOC PEAK"]), file=out)
    if prediction is None:
        print("no forecaster on this server yet: showing history only", file=out)
    else:
        print(forecast_summary(prediction), file=out)
    return 0


def forecast_summary(f: dict[str, Any]) -> str:
    """A forecast in a few lines: the next hour, the coming peak, and how the model backtested
    (every value is in `--json`)."""
    values, lower, upper, times = (
        f.get("values") or [],
        f.get("lower") or [],
        f.get("upper") or [],
        f.get("times") or [],
    )
    who = f"tenant {f['tenant']}" if f.get("tenant") else "all tenants"
    if not values:
        return f"Forecast of GPUs {f.get('series', 'requested')}, {who}: no history yet. {f.get('note', '')}".rstrip()
    step = float(f.get("step_s") or 600)
    hour = max(1, round(3600 / step))
    lines = [
        f"Forecast of GPUs {f.get('series', 'requested')}, {who} ({f.get('model')}, {len(values)} steps of {step / 60:g} min):"
    ]
    mean = sum(values[:hour]) / len(values[:hour])
    lines.append(f"  next hour  {mean:.1f} GPUs (band {min(lower[:hour]):.1f} to {max(upper[:hour]):.1f})")
    peak = max(range(len(values)), key=values.__getitem__)
    when = str(times[peak])[:16].replace("T", " ") if peak < len(times) else "?"
    span = f"next {len(values) * step / 3600:g} h"
    lines.append(f"  {span:<10} peak {values[peak]:.1f} GPUs at {when} (band up to {max(upper):.1f})")
    models = ((f.get("skill") or {}).get("models")) or {}
    scored = [(name, m["mase"]) for name, m in models.items() if isinstance(m, dict) and m.get("mase") is not None]
    if scored:
        lines.append(
            "  backtest MASE (lower is better): "
            + " · ".join(f"{n} {v:.2f}" for n, v in sorted(scored, key=lambda x: x[1]))
        )
    if f.get("note"):
        lines.append(f"  {f['note']}")
    lines.append("  (--json prints every value)")
    return "\n".join(lines)


Command = Callable[[Client, argparse.Namespace, TextIO], int]

# The commands that talk to a server, by name; `build_parser` gives each its options.
SERVER_COMMANDS: dict[str, Command] = {
    "submit": submit,
    "list": list_jobs,
    "status": status,
    "cancel": cancel,
    "logs": logs,
    "output": output,
    "queues": queues,
    "cluster": cluster,
    "forecast": forecast,
}
