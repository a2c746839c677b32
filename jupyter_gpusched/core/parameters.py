"""The one rule for a job's papermill parameters, used at submit (the REST API) and at launch (the runner).

Names become variable names in the injected cell, so each must be a Python identifier (not a
keyword). Values must be JSON data: str, int, finite float, bool, None, and lists / objects of
those, at most `MAX_PARAMETER_DEPTH` deep; papermill renders them as literals, never as code.
All of them together, as JSON, may be at most `MAX_PARAMETERS_BYTES` (they are copied into the
executed notebook and kept in the job store). Strings must be valid Unicode (no lone surrogate),
or neither the store nor the notebook file could hold them.
"""

from __future__ import annotations

import json
import keyword
import math
from collections.abc import Mapping
from typing import Any

from .scheduler import SpecError

MAX_PARAMETER_DEPTH = 32  # lists / objects inside a parameter's value
MAX_PARAMETERS_BYTES = 64 * 1024  # all parameters as compact UTF-8 JSON


class ParametersTooLarge(SpecError):
    """The parameters are well formed but over `MAX_PARAMETERS_BYTES` (the REST API answers 413)."""


def check_parameters(parameters: Any) -> dict[str, Any]:
    """Return `parameters` as a plain JSON dict (tuples become lists), or raise SpecError naming
    the offending parameter (`parameters.<name>`)."""
    if not isinstance(parameters, Mapping):
        raise SpecError("parameters", "parameters must be an object of name: value")
    for name, value in parameters.items():
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
            raise SpecError(f"parameters.{name}", f"parameter name {name!r} is not a valid Python identifier")
        _check_value(name, value, 0)
    try:
        text = json.dumps(dict(parameters), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise SpecError("parameters", "parameters must be valid Unicode text (no lone surrogate)") from None
    if size > MAX_PARAMETERS_BYTES:
        raise ParametersTooLarge(
            "parameters", f"parameters are {size} bytes as JSON; the limit is {MAX_PARAMETERS_BYTES} bytes"
        )
    return json.loads(text)


def _check_value(name: str, value: Any, depth: int) -> None:
    field = f"parameters.{name}"
    if depth > MAX_PARAMETER_DEPTH:
        raise SpecError(field, f"parameter {name!r} is nested more than {MAX_PARAMETER_DEPTH} levels deep")
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SpecError(field, f"parameter {name!r} is {value}; numbers must be finite")
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_value(name, item, depth + 1)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise SpecError(field, f"parameter {name!r} has a non-string key {key!r}")
            _check_value(name, item, depth + 1)
        return
    raise SpecError(field, f"parameter {name!r} has a value of type {type(value).__name__}; use JSON values")
