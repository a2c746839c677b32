"""The job-spec field list (core/spec_fields.py) is the API's submit schema, and the edges offer all of it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import jupyter_gpusched.server as server_pkg
from jupyter_gpusched import cli
from jupyter_gpusched.core import JobSpec, Priority
from jupyter_gpusched.core.spec_fields import (
    DEFAULT_PRIORITY,
    FIELDS_BY_NAME,
    MAX_RETRIES_LIMIT,
    PRIORITY_CHOICES,
    SUBMIT_FIELDS,
    SUBMIT_SPEC,
)
from jupyter_gpusched.server import validation

SPEC = yaml.safe_load((Path(server_pkg.__file__).parent / "openapi.yaml").read_text())
SUBMIT_SCHEMA = SPEC["components"]["schemas"]["JobSubmit"]
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def test_the_fields_are_the_submit_schemas_properties():
    assert [f.name for f in SUBMIT_SPEC] == list(SUBMIT_SCHEMA["properties"])
    assert {f.name for f in SUBMIT_SPEC if f.required} == set(SUBMIT_SCHEMA["required"])


@pytest.mark.parametrize("field", SUBMIT_SPEC, ids=lambda f: f.name)
def test_each_field_has_the_schemas_type_default_and_choices(field):
    prop = SUBMIT_SCHEMA["properties"][field.name]
    assert JSON_TYPES[field.type] == prop["type"]
    assert field.default == prop.get("default")
    assert field.nullable == prop.get("nullable", False)
    assert field.choices == (tuple(prop["enum"]) if "enum" in prop else None)
    assert field.option == "--" + field.name.replace("_", "-")


def test_priorities_come_from_the_core_most_urgent_first():
    assert PRIORITY_CHOICES == ("high", "normal", "low")
    assert tuple(SPEC["components"]["schemas"]["Job"]["properties"]["priority"]["enum"]) == PRIORITY_CHOICES
    assert [Priority.parse(p) for p in PRIORITY_CHOICES] == sorted(Priority, reverse=True)
    default = next(f.default for f in dataclasses.fields(JobSpec) if f.name == "priority")
    assert DEFAULT_PRIORITY == default.label


def test_the_defaults_are_the_cores():
    core_defaults = {f.name: f.default for f in dataclasses.fields(JobSpec) if f.default is not dataclasses.MISSING}
    for name in ("gpus", "max_runtime", "preemptible", "max_retries", "gpu_type"):
        assert FIELDS_BY_NAME[name].default == core_defaults[name], name
    assert SUBMIT_SCHEMA["properties"]["max_retries"]["maximum"] == MAX_RETRIES_LIMIT


def test_the_server_accepts_exactly_these_fields():
    # server/validation.py keeps its own copy until it reads this list; this holds the two equal
    assert set(validation.SUBMIT_FIELDS) == SUBMIT_FIELDS
    assert validation.MAX_RETRIES_LIMIT == MAX_RETRIES_LIMIT


def test_the_cli_submit_command_has_an_option_for_every_field():
    parser = cli.build_parser()
    submit = parser._subparsers._group_actions[0].choices["submit"]  # type: ignore[union-attr]
    options = {o for action in submit._actions for o in action.option_strings}
    assert {f.option for f in SUBMIT_SPEC if f.user_option and f.name not in ("notebook", "parameters")} <= options
    assert {"-p", "--param"} <= options
