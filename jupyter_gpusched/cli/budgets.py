"""`jupyter gpusched usage`: showback for this period (GPU-hours, cost, spot savings) and the budgets."""

from __future__ import annotations

import argparse
from typing import TextIO

from ..client import Client
from .commands import _json, _table


def usage(client: Client, args: argparse.Namespace, out: TextIO) -> int:
    if args.csv:
        out.write(client.usage_report(args.period, args.by, "csv"))
        return 0
    report = client.usage_report(args.period, args.by)
    if args.json:
        _json(report, out)
        return 0
    by = report["by"]
    head = [
        by.upper(),
        *(["TENANT"] if by != "tenant" else []),
        "JOBS",
        "GPU-HOURS",
        "COST",
        "SPOT GPU-H",
        "SPOT SAVED",
    ]
    rows = [
        [
            str(r[by]),
            *([r["tenant"]] if by != "tenant" else []),
            str(r["jobs"]),
            f"{r['gpu_hours']:.2f}",
            f"{r['cost']:.2f}",
            f"{r['spot_gpu_hours']:.2f}",
            f"{r['spot_savings']:.2f}",
        ]
        for r in report["rows"]
    ]
    print(f"period: {report['period']} ({report['timezone']})", file=out)
    print(_table(rows, head), file=out)
    for tenant, b in report["budgets"].items():
        print(
            f"budget {tenant}: {b['used']:.2f} / {b['budget']:g} {b['unit']} ({b['state']}, {b['enforce']})", file=out
        )
    return 0


def add_parser(sub) -> None:
    u = sub.add_parser("usage", help="showback: GPU-hours, cost and spot savings this period, and budgets")
    u.add_argument("--by", choices=("tenant", "user", "job"), default="tenant")
    u.add_argument("--period", choices=("day", "week", "month"), default="month")
    u.add_argument("--csv", action="store_true", help="CSV with a header line")
    u.add_argument("--json", action="store_true")
