"""The submit options, made from the job-spec field list (core/spec_fields.py) for the CLI and the magic.

Options the user does not give are not sent, so the server's defaults are the only defaults.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..core.spec_fields import SUBMIT_SPEC
from ..params import param_arg

_METAVARS = {
    "gpus": "N",
    "tenant": "TENANT",
    "max_runtime": "SECONDS",
    "checkpoint_interval": "SECONDS",
    "max_retries": "N",
    "gpu_type": "TYPE",
}


def add_spec_options(parser: argparse.ArgumentParser) -> None:
    """One option per submit field except the notebook (the caller's positional or cell): `--gpus`,
    `--priority`, ..., `-p NAME=VALUE` for each parameter."""
    for spec_field in SUBMIT_SPEC:
        if spec_field.required or not spec_field.user_option:
            continue
        if spec_field.name == "parameters":
            parser.add_argument(
                "-p",
                "--param",
                dest="parameters",
                action="append",
                type=param_arg,
                metavar="NAME=VALUE",
                help="a papermill parameter; the value is read as a Python literal, else kept as text (repeatable)",
            )
        elif spec_field.name == "notify":
            parser.add_argument("--notify", dest="notify", action="append", metavar="TARGET", help=spec_field.help)
        elif spec_field.type is list:  # repeatable: --after ID --after ID
            parser.add_argument(
                spec_field.option, dest=spec_field.name, action="append", metavar="ID", help=spec_field.help
            )
        elif spec_field.type is bool:
            parser.add_argument(
                spec_field.option, dest=spec_field.name, action="store_true", default=None, help=spec_field.help
            )
        else:
            parser.add_argument(
                spec_field.option,
                dest=spec_field.name,
                type=spec_field.type,
                choices=spec_field.choices,
                metavar=_METAVARS.get(spec_field.name),
                help=spec_field.help,
            )


def spec_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The submit fields the user gave (everything `add_spec_options` added), ready for Client.submit."""
    fields: dict[str, Any] = {}
    for spec_field in SUBMIT_SPEC:
        value = getattr(args, spec_field.name, None)
        if spec_field.required or value is None:
            continue
        fields[spec_field.name] = dict(value) if spec_field.name == "parameters" else value
        if spec_field.name == "notify":  # `--notify none` asks for no notices at all
            fields["notify"] = [] if [v.lower() for v in value] == ["none"] else list(value)
    return fields
