"""`jupyter gpusched ...` (and its alias `gpusched ...`): the command line, over the one client.

The server commands live in commands.py, the submit options (one per job-spec field) in options.py;
bench, manifest, forecast-eval and hub-service parse their own arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO

from ..client import Client, GPUSchedError
from .budgets import add_parser as add_usage_parser
from .budgets import usage
from .commands import SERVER_COMMANDS, TERMINAL, follow
from .options import add_spec_options
from .pipelines import add_pipeline_parser, pipeline
from .schedules import add_schedule_parser, schedule

SERVER_COMMANDS["pipeline"] = pipeline  # cli/pipelines.py
SERVER_COMMANDS["schedule"] = schedule  # its own module (it has subcommands)

__all__ = [
    "OneLineErrorParser",
    "SELF_PARSING_COMMANDS",
    "SERVER_COMMANDS",
    "TERMINAL",
    "build_parser",
    "follow",
    "main",
    "run",
]

# Commands that parse their own arguments and run without a server: the terminal's, not the magic's.
SELF_PARSING_COMMANDS = {
    "bench": "replay a trace in the simulator and compare policies (see `bench --help`)",
    "manifest": "print the Kubernetes Job YAML a notebook would become (see `manifest --help`)",
    "forecast-eval": "backtest the demand forecaster on your own series (see `forecast-eval --help`)",
    "hub-service": "run the scheduler as a JupyterHub service (see docs/jupyterhub.md)",
    "kernelspec": "install a GPU kernelspec: `kernelspec install --gpus N` (see docs/interactive.md)",
}


class OneLineErrorParser(argparse.ArgumentParser):
    """A usage error is one line naming the fix (exit code 2), not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(
    prog: str = "jupyter gpusched",
    parser_class: type[argparse.ArgumentParser] = OneLineErrorParser,
    self_parsing: bool = True,
) -> argparse.ArgumentParser:
    """The parser of the server commands (plus, with `self_parsing`, the names of the others for --help)."""
    p = parser_class(prog=prog, description="Queue notebooks as GPU jobs on a Jupyter server.")
    p.add_argument("--url", help="server URL (default: GPUSCHED_URL, else the running Jupyter server)")
    p.add_argument("--token", help="server token (default: GPUSCHED_TOKEN, else the running server's)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=parser_class)

    s = sub.add_parser("submit", help="queue a notebook as a GPU job")
    s.add_argument("notebook", help="path of the .ipynb (inside the server's root folder)")
    add_spec_options(s)
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
    o.add_argument("-o", "--out", help="file to write (default: <notebook name>.<job id>.ipynb in the current folder)")

    q = sub.add_parser("queues", help="usage vs quota per tenant")
    q.add_argument("--json", action="store_true")
    cl = sub.add_parser("cluster", help="nodes, GPUs and utilisation")
    cl.add_argument("--json", action="store_true")

    f = sub.add_parser(
        "forecast", help="GPU demand: recent history per tenant, and the forecast where the server has one"
    )
    f.add_argument("--minutes", type=int, default=24 * 60, help="history window (default: a day)")
    f.add_argument("--json", action="store_true")

    add_usage_parser(sub)
    add_pipeline_parser(sub)
    add_schedule_parser(sub)

    if self_parsing:  # listed for --help; main() hands them their arguments before this parser runs
        for name, help_text in SELF_PARSING_COMMANDS.items():
            sub.add_parser(name, help=help_text, add_help=False)
    return p


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    """Run one server command parsed by `build_parser`; its exit code."""
    command = {**SERVER_COMMANDS, "usage": usage}.get(args.command)
    if command is None:  # a self-parsing command given to the server parser: say so, never do nothing
        raise GPUSchedError(f"{args.command} parses its own arguments: run `jupyter gpusched {args.command} --help`")
    return command(Client(args.url, args.token), args, out)


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
    if argv and argv[0] == "kernelspec":  # GPU kernels (docs/interactive.md); no server needed
        from .kernelspec import kernelspec_main

        return kernelspec_main(argv[1:])
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
