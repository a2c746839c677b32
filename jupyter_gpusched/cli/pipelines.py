"""`jupyter gpusched pipeline run FILE.yaml` / `pipeline show ID` (docs/pipelines.md); `pipeline FILE` runs too."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, TextIO

from ..client import Client, GPUSchedError
from .commands import TERMINAL, _job_line, _table


def add_pipeline_parser(sub: Any) -> None:
    p = sub.add_parser("pipeline", help="run a pipeline file (steps and edges) or show a pipeline's steps")
    p.add_argument("action", help="run FILE | show ID | FILE (same as run)")
    p.add_argument("target", nargs="?", help="the pipeline file (.yaml or .json) or pipeline id")
    p.add_argument("--wait", action="store_true", help="wait until every step ended")
    p.add_argument("--json", action="store_true")


def _show(pipe: dict[str, Any], out: TextIO) -> None:
    print(f"pipeline {pipe['id']}: {pipe['state']}", file=out)
    rows = [[str(i), *_job_line(step), step.get("reason", "")] for i, step in enumerate(pipe["steps"])]
    header = ["STEP", "ID", "STATE", "PRIORITY", "GPUS", "TENANT", "CELLS", "NOTEBOOK", "REASON"]
    print(_table(rows, header), file=out)
    if pipe["edges"]:
        print("edges: " + ", ".join(f"{a}->{b}" for a, b in pipe["edges"]), file=out)


def pipeline(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    action, target = args.action, args.target
    if target is None and action not in ("run", "show"):
        action, target = "run", action  # `pipeline FILE`
    if target is None:
        raise GPUSchedError(f"pipeline {action} needs a {'file' if action == 'run' else 'pipeline id'}")
    if action == "run":
        pipe = client.run_pipeline_file(target)
    elif action == "show":
        pipe = client.pipeline(target)
    else:
        raise GPUSchedError(f"unknown pipeline action {action!r}; use run FILE or show ID")
    while args.wait and not all(step["state"] in TERMINAL for step in pipe["steps"]):
        time.sleep(1.0)
        pipe = client.pipeline(pipe["id"])
    if args.json:
        print(json.dumps(pipe, indent=2), file=out)
    else:
        _show(pipe, out)
    return 1 if args.wait and pipe["state"] != "SUCCEEDED" else 0
