"""Papermill parameters typed as `name=value`: one set of rules for the CLI, the magic and the widgets.

They are the lab form's rules (labextension/src/params.ts), so the same text sends the same
value from every edge:

- a Python literal becomes its value: `0.1`, `1e-3` (0.001), `3.0` (stays a float), `True`,
  `None`, `'adam'`, `[1, 2]`, `{'a': 1}`; JSON's `true`, `false`, `null` and JSON lists and
  objects are accepted too;
- anything else stays the string typed (`adam`, `2024-01-01`, `a b`), and so does a literal
  JSON cannot carry (a tuple, a set, bytes, a complex or non-finite number);
- names must be Python identifiers and not keywords (the server refuses others).
"""

from __future__ import annotations

import argparse
import ast
import json
import keyword
import math
import re
from typing import Any

__all__ = ["ParamError", "param_arg", "parse_assignment", "parse_lines", "parse_value"]

# The numbers the lab form reads as numbers (params.ts); `0x10`, `1_000` stay strings there, so here too.
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")
_JSON_WORDS = {"true": True, "false": False, "null": None}


class ParamError(ValueError):
    """A parameter that cannot be sent, as one readable line."""


def parse_value(text: str) -> Any:
    """The JSON value for a typed parameter value (see the module docstring for the rules)."""
    t = text.strip()
    if not t:
        return ""
    if t in _JSON_WORDS:
        return _JSON_WORDS[t]
    try:
        value = ast.literal_eval(t)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = _json_container(t)
        if value is None:
            return t
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _NUMBER.fullmatch(t):
        return t
    return value if _fits_json(value) else t


def _json_container(t: str) -> Any:
    """A JSON list or object (e.g. `[true, null]`, which is no Python literal), else None."""
    if t[0] not in "[{":
        return None
    try:
        return json.loads(t)
    except (ValueError, RecursionError):
        return None


def _fits_json(value: Any) -> bool:
    """Whether JSON carries the value as it is (a tuple would come back a list, a set not at all)."""
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_fits_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _fits_json(v) for k, v in value.items())
    return False


def check_name(name: str, text: str | None = None) -> str:
    """The name if it can be a papermill parameter; else ParamError."""
    where = f" (in {text!r})" if text is not None else ""
    if keyword.iskeyword(name):
        raise ParamError(f"parameter name {name!r} is a Python keyword{where}")
    if not name.isidentifier():
        raise ParamError(f"parameter name {name!r} is not a valid Python identifier{where}")
    return name


def parse_assignment(text: str) -> tuple[str, Any]:
    """`name=value` -> (name, value); ParamError if it is no such thing or the name is not an identifier."""
    if "=" not in text:
        raise ParamError(f"parameter {text!r} must look like name=value")
    name, raw = text.split("=", 1)
    return check_name(name.strip(), text), parse_value(raw)


def param_arg(text: str) -> tuple[str, Any]:
    """`parse_assignment` as an argparse `type=`: a bad parameter is a usage error (exit code 2)."""
    try:
        return parse_assignment(text)
    except ParamError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_lines(text: str) -> dict[str, Any]:
    """One `name=value` a line (the widgets' text box); blank lines and `# comments` are skipped."""
    params: dict[str, Any] = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = strip_comment(line).strip()
        if not line:
            continue
        if "=" not in line:
            raise ParamError(f"parameter line {n} must look like name=value")
        try:
            name, value = parse_assignment(line)
        except ParamError as exc:
            raise ParamError(f"parameter line {n}: {exc}") from None
        params[name] = value
    return params


def strip_comment(line: str) -> str:
    """Drop a trailing `# comment`, leaving `#` inside quotes alone (as params.ts's stripComment)."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#":
            return line[:i].rstrip()
        i += 1
    return line
