"""`jupyter gpusched schedule add|list|pause|resume|rm|jobs` (and `%gpusched schedule ...`): recurring
schedules over the one client. `add` takes the submit options (options.py) for each run's job fields."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..client import Client, GPUSchedError
from .commands import _job_line, _table
from .options import add_spec_options, spec_from_args


def add_schedule_parser(sub: Any) -> None:
    """The `schedule` command and its subcommands, on the server commands' subparsers."""
    p = sub.add_parser("schedule", help="recurring schedules: add, list, pause, resume, rm, jobs")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="run a notebook (or a pipeline) at each time of a cron expression")
    add.add_argument("notebook", nargs="?", help="path of the .ipynb (inside the server's root folder)")
    add.add_argument("--pipeline", metavar="FILE", help="run this pipeline file (as `pipeline run` reads it) instead")
    add.add_argument("--cron", required=True, help="5 fields: minute hour day month weekday, e.g. '0 2 * * *'")
    add.add_argument("--tz", "--timezone", dest="timezone", default="UTC", help="IANA time zone (default UTC)")
    add.add_argument("--overlap", choices=["skip", "queue"], help="previous run still active: skip (default) or queue")
    add.add_argument("--catch-up", dest="catch_up", choices=["once", "skip"], help="missed times: once (default)")
    add.add_argument("--paused", action="store_true", default=None, help="create it paused")
    add_spec_options(add)
    add.add_argument("--json", action="store_true")
    ls = actions.add_parser("list", help="your schedules (an admin's: everyone's)")
    ls.add_argument("--mine", action="store_true")
    ls.add_argument("--json", action="store_true")
    for name, help_text in [("pause", "pause a schedule"), ("resume", "resume it (counting from now)"),
                            ("rm", "delete a schedule (its runs stay)")]:  # fmt: skip
        actions.add_parser(name, help=help_text).add_argument("schedule_id")
    jobs = actions.add_parser("jobs", help="a schedule's runs, newest first")
    jobs.add_argument("schedule_id")
    jobs.add_argument("--json", action="store_true")


def _line(s: dict[str, Any]) -> list[str]:
    state = "paused" if s["paused"] else (s["next_run"] or "")[:16].replace("T", " ") + " UTC"
    last = f"{s['last_job']} {s['last_state'] or ''}".strip() if s["last_job"] else "-"
    what = f"pipeline of {len(s['pipeline']['steps'])} steps" if s.get("pipeline") else s["notebook"]
    return [s["id"], s["cron"], s["timezone"], state, last, what]


def schedule(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if args.action == "add":
        extra = {k: getattr(args, k) for k in ("overlap", "catch_up", "paused")}
        if (args.notebook is None) == (args.pipeline is None):
            raise GPUSchedError("schedule add takes a notebook or --pipeline FILE (one of them)", field="pipeline")
        if args.pipeline is not None:
            fields = {k: v for k, v in spec_from_args(args).items() if v is not None}
            if fields:  # each step has its own, in the file
                raise GPUSchedError(
                    f"--pipeline: job options go in the file's steps, not {sorted(fields)}", field="pipeline"
                )
            s = client.add_pipeline_schedule(args.pipeline, args.cron, args.timezone, **extra)
        else:
            s = client.add_schedule(args.notebook, args.cron, args.timezone, **spec_from_args(args), **extra)
        if args.json:
            print(json.dumps(s, indent=2), file=out)
        else:
            print(f"schedule {s['id']}: {s['cron']} ({s['timezone']}), next run {s['next_run'] or 'paused'}", file=out)
    elif args.action == "list":
        rows = client.schedules(mine=args.mine)
        if args.json:
            print(json.dumps(rows, indent=2), file=out)
        elif not rows:
            print("no schedules", file=out)
        else:
            print(
                _table([_line(s) for s in rows], ["ID", "CRON", "TIMEZONE", "NEXT RUN", "LAST", "NOTEBOOK"]), file=out
            )
    elif args.action in ("pause", "resume"):
        s = client.update_schedule(args.schedule_id, paused=args.action == "pause")
        print(f"schedule {s['id']} {'paused' if s['paused'] else 'resumed, next run ' + str(s['next_run'])}", file=out)
    elif args.action == "rm":
        client.delete_schedule(args.schedule_id)
        print(f"schedule {args.schedule_id} deleted (its runs stay)", file=out)
    elif args.action == "jobs":
        runs = client.schedule_jobs(args.schedule_id)
        if args.json:
            print(json.dumps(runs, indent=2), file=out)
        elif not runs:
            print("no runs yet", file=out)
        else:
            header = ["ID", "STATE", "PRIORITY", "GPUS", "TENANT", "CELLS", "NOTEBOOK"]
            print(_table([_job_line(j) for j in runs], header), file=out)
    return 0
