"""`jupyter gpusched ...` (and its alias `gpusched ...`): the command line, over the one client."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

import yaml

from ..client import Client, GPUSchedError

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def _param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"parameter {text!r} must look like name=value")
    name, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        value = raw
    return name.strip(), value


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
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


def build_parser(prog: str = "jupyter gpusched", parser_class: type[argparse.ArgumentParser] = argparse.ArgumentParser) -> argparse.ArgumentParser:
    p = parser_class(prog=prog, description="Queue notebooks as GPU jobs on a Jupyter server.")
    p.add_argument("--url", help="server URL (default: GPUSCHED_URL, else the running Jupyter server)")
    p.add_argument("--token", help="server token (default: GPUSCHED_TOKEN, else the running server's)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=parser_class)

    s = sub.add_parser("submit", help="queue a notebook as a GPU job")
    s.add_argument("notebook", help="path of the .ipynb (inside the server's root folder)")
    s.add_argument("--gpus", type=int, default=1)
    s.add_argument("--priority", choices=["high", "normal", "low"], default="normal")
    s.add_argument("--tenant", help="queue/tenant to charge (default: yours)")
    s.add_argument("-p", "--param", dest="params", action="append", type=_param, default=[], metavar="NAME=VALUE")
    s.add_argument("--max-runtime", type=float, help="seconds; the job is stopped past it")
    s.add_argument("--preemptible", action="store_true", help="may run on spot capacity and be preempted")
    s.add_argument("--wait", action="store_true", help="wait until the job ends and print its log")
    s.add_argument("--json", action="store_true")

    ls = sub.add_parser("list", help="list jobs")
    ls.add_argument("--state", help="only jobs in this state (QUEUED, RUNNING, ...)")
    ls.add_argument("--tenant")
    ls.add_argument("--mine", action="store_true")
    ls.add_argument("--json", action="store_true")

    st = sub.add_parser("status", help="one job in detail, with its history")
    st.add_argument("job_id")
    st.add_argument("--json", action="store_true")

    c = sub.add_parser("cancel", help="cancel a job")
    c.add_argument("job_id")

    lg = sub.add_parser("logs", help="print a job's log")
    lg.add_argument("job_id")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")

    o = sub.add_parser("output", help="save the executed notebook")
    o.add_argument("job_id")
    o.add_argument("-o", "--out", help="file to write (default: <job id>.ipynb)")

    q = sub.add_parser("queues", help="usage vs quota per tenant")
    q.add_argument("--json", action="store_true")
    cl = sub.add_parser("cluster", help="nodes, GPUs and utilisation")
    cl.add_argument("--json", action="store_true")

    f = sub.add_parser("forecast", help="GPU demand: recent history per tenant, and the forecast where the server has one")
    f.add_argument("--minutes", type=int, default=24 * 60, help="history window (default: a day)")
    f.add_argument("--json", action="store_true")

    sub.add_parser("bench", help="replay a trace in the simulator and compare policies (see `bench --help`)", add_help=False)
    sub.add_parser("manifest", help="print the Kubernetes Job YAML a notebook would become (see `manifest --help`)", add_help=False)
    sub.add_parser("forecast-eval", help="backtest the demand forecaster on your own series (see `forecast-eval --help`)", add_help=False)
    sub.add_parser("hub-service", help="run the scheduler as a JupyterHub service (see docs/jupyterhub.md)", add_help=False)
    return p


def _follow(client: Client, job_id: str, out=sys.stdout) -> dict[str, Any]:
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


def run(args: argparse.Namespace, out=sys.stdout) -> int:
    client = Client(args.url, args.token)
    cmd = args.command
    if cmd == "submit":
        job = client.submit(
            args.notebook,
            gpus=args.gpus,
            priority=args.priority,
            tenant=args.tenant,
            parameters=dict(args.params),
            max_runtime=args.max_runtime,
            preemptible=args.preemptible,
        )
        if args.json:
            print(json.dumps(job, indent=2), file=out)
        else:
            where = f", position {job['position'] + 1} in line" if job.get("position") is not None else ""
            print(f"submitted {job['id']}: {job['state']}{where}", file=out)
        if args.wait:
            job = _follow(client, job["id"], out)
            print(f"\n{job['id']} {job['state']}: {job.get('reason', '')}", file=out)
            return 0 if job["state"] == "SUCCEEDED" else 1
    elif cmd == "list":
        jobs = client.jobs(state=args.state, tenant=args.tenant, mine=args.mine)
        if args.json:
            print(json.dumps(jobs, indent=2), file=out)
        elif not jobs:
            print("no jobs", file=out)
        else:
            print(_table([_job_line(j) for j in jobs], ["ID", "STATE", "PRIORITY", "GPUS", "TENANT", "CELLS", "NOTEBOOK"]), file=out)
    elif cmd == "status":
        job = client.get(args.job_id)
        events = client.events(args.job_id)
        if args.json:
            print(json.dumps(dict(job, events=events), indent=2), file=out)
        else:
            for key in ("id", "state", "notebook", "gpus", "priority", "tenant", "owner", "created", "started", "finished", "reason", "message"):
                if job.get(key) not in (None, ""):
                    print(f"{key:>15}: {job[key]}", file=out)
            if job.get("position") is not None:
                print(f"{'position':>15}: {job['position'] + 1}", file=out)
                print(f"{'estimated start':>15}: {job.get('estimated_start') or 'unknown (running jobs have no runtime limit)'}", file=out)
            if job.get("allocation"):
                print(f"{'gpus on':>15}: " + ", ".join(f"{a['node']}:{a['gpus']}" for a in job["allocation"]), file=out)
            print("history:", file=out)
            for e in events:
                print(f"  {e['time']}  {e['from'] or '-':>9} -> {e['to']:<9} {e['reason']} ({e['actor']})", file=out)
    elif cmd == "cancel":
        job = client.cancel(args.job_id)
        print(f"{job['id']}: {job['state']}", file=out)
    elif cmd == "logs":
        if args.follow:
            _follow(client, args.job_id, out)
        else:
            out.write(client.log(args.job_id)[0])
    elif cmd == "output":
        data = client.output(args.job_id)
        path = args.out or f"{args.job_id}.ipynb"
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {path}", file=out)
    elif cmd == "queues":
        q = client.queues()
        if args.json:
            print(json.dumps(q, indent=2), file=out)
        else:
            rows = [
                [t, str(v["quota"]), "any" if v["burst"] is None else str(v["burst"]), str(v["used"]), str(v["borrowed"]), str(v["queued"]), str(v["running"])]
                for t, v in q["queues"].items()
            ]
            print(f"policy: {q['policy']}", file=out)
            print(_table(rows, ["TENANT", "QUOTA", "BURST", "USED", "BORROWED", "QUEUED", "RUNNING"]), file=out)
    elif cmd == "cluster":
        c = client.cluster()
        if args.json:
            print(json.dumps(c, indent=2), file=out)
        else:
            print(f"{c['backend']} backend, {c['policy']} policy: {c['allocated_gpus']}/{c['total_gpus']} GPUs allocated ({c['utilization']:.0%})", file=out)
            rows = [[n["name"], n["pool"], str(n["gpus"]), str(n["free"]), ",".join(n["jobs"])] for n in c["nodes"]]
            print(_table(rows, ["NODE", "POOL", "GPUS", "FREE", "JOBS"]), file=out)
    elif cmd == "forecast":
        usage = client.usage(args.minutes)
        forecast = client.forecast()
        if args.json:
            print(json.dumps({"usage": usage, "forecast": forecast}, indent=2), file=out)
            return 0
        rows = []
        for tenant, s in sorted(usage["tenants"].items()):
            req, alloc = s["requested"], s["allocated"]
            rows.append([tenant, str(req[-1]), str(max(req)), f"{sum(req) / len(req):.1f}", str(alloc[-1]), str(max(alloc))])
        span = f"{len(usage['minutes'])} minutes recorded" if usage["minutes"] else "no history yet"
        print(f"GPU demand, last {args.minutes} min ({span}):", file=out)
        if rows:
            print(_table(rows, ["TENANT", "REQ NOW", "REQ PEAK", "REQ MEAN", "ALLOC NOW", "ALLOC PEAK"]), file=out)
        if forecast is None:
            print("no forecaster on this server yet: showing history only", file=out)
        else:
            print(json.dumps(forecast, indent=2), file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "bench":  # the simulator parses its own arguments
        from ..sim.report import bench_main

        return bench_main(argv[1:])
    if argv and argv[0] == "manifest":  # the kubernetes backend's manifests; its own arguments
        from .manifest import manifest_main

        return manifest_main(argv[1:])
    if argv and argv[0] == "forecast-eval":  # its own arguments, and no server needed
        from .forecast_eval import forecast_eval_main

        return forecast_eval_main(argv[1:])
    if argv and argv[0] == "hub-service":  # a Jupyter server app: its own traitlets options
        from ..hub.app import main as hub_main

        hub_main(argv[1:])
        return 0
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except GPUSchedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130

