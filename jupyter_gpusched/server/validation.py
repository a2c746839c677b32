"""Request parsing: turn a JSON body into submit arguments or a clear 4xx error.

Only shape and types are checked here, plus the notebook path (a server-root concern).
Whether a job can ever run (GPU counts, tenant limits) is the core's call (SpecError).
"""

from __future__ import annotations

import json
import keyword
import math
from pathlib import Path, PurePosixPath
from typing import Any

import nbformat


class ApiError(Exception):
    """A request the server refuses: `status` (4xx), `error` code, a sentence, the field."""

    def __init__(self, status: int, error: str, message: str, field: str | None = None):
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.field = field

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "message": self.message, "field": self.field}


SUBMIT_FIELDS = {
    "notebook",
    "gpus",
    "priority",
    "tenant",
    "parameters",
    "max_runtime",
    "preemptible",
    "max_retries",
    "gpu_type",
}
MAX_RETRIES_LIMIT = 10


def parse_json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "the request body must be a JSON object")
    return body


def _wrong_type(field: str, expected: str, value: Any) -> ApiError:
    return ApiError(400, "wrong_type", f"{field} must be {expected}, not {type(value).__name__} {value!r}"[:300], field)


def _int(body: dict, field: str, default: int, low: int, high: int | None = None) -> int:
    value = body.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong_type(field, "a whole number", value)
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ApiError(400, "invalid_value", f"{field} must be {bound}, not {value}", field)
    return value


def _optional_str(body: dict, field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _wrong_type(field, "a non-empty string", value)
    return value.strip()


def parse_submit(body: dict[str, Any]) -> dict[str, Any]:
    """Check a submit body's shape; return keyword arguments for Service.submit."""
    unknown = sorted(set(body) - SUBMIT_FIELDS)
    if unknown:
        raise ApiError(
            400,
            "unknown_field",
            f"unknown field {unknown[0]!r}; allowed fields: {', '.join(sorted(SUBMIT_FIELDS))}",
            unknown[0],
        )
    if "notebook" not in body:
        raise ApiError(
            400, "missing_field", "notebook is required: the notebook's path relative to the server root", "notebook"
        )
    notebook = body["notebook"]
    if not isinstance(notebook, str) or not notebook.strip():
        raise _wrong_type("notebook", "a path string", notebook)
    priority = body.get("priority", "normal")
    if not isinstance(priority, str):
        raise _wrong_type("priority", "one of 'high', 'normal', 'low'", priority)
    if priority.lower() not in ("high", "normal", "low"):
        raise ApiError(400, "invalid_value", f"unknown priority {priority!r}; use one of high, normal, low", "priority")
    max_runtime = body.get("max_runtime")
    if max_runtime is not None:
        if isinstance(max_runtime, bool) or not isinstance(max_runtime, (int, float)):
            raise _wrong_type("max_runtime", "a number of seconds", max_runtime)
        if not (max_runtime > 0 and math.isfinite(max_runtime)):
            raise ApiError(
                400,
                "invalid_value",
                f"max_runtime must be a positive number of seconds, not {max_runtime}",
                "max_runtime",
            )
    preemptible = body.get("preemptible", False)
    if not isinstance(preemptible, bool):
        raise _wrong_type("preemptible", "true or false", preemptible)
    return {
        "notebook": notebook.strip(),
        "gpus": _int(body, "gpus", 1, 1),
        "priority": priority.lower(),
        "tenant": _optional_str(body, "tenant"),
        "parameters": parse_parameters(body.get("parameters", {})),
        "max_runtime": float(max_runtime) if max_runtime is not None else None,
        "preemptible": preemptible,
        "max_retries": _int(body, "max_retries", 2, 0, MAX_RETRIES_LIMIT),
        "gpu_type": _optional_str(body, "gpu_type"),
    }


def parse_parameters(value: Any) -> dict[str, Any]:
    """Papermill parameters: an object whose keys are Python identifiers."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _wrong_type("parameters", "an object of name: value", value)
    for key in value:
        if not key.isidentifier() or keyword.iskeyword(key):
            raise ApiError(
                400, "invalid_value", f"parameter name {key!r} is not a valid Python identifier", f"parameters.{key}"
            )
    return value


def resolve_notebook(root_dir: str | Path, path: str) -> str:
    """The notebook's path relative to the server root, checked to exist, to be a notebook,
    and to stay inside the root (no `..`, no absolute path, no symlink out)."""
    root = Path(root_dir).resolve()
    posix = PurePosixPath(path.replace("\\", "/"))
    if posix.is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise ApiError(
            400, "invalid_value", f"notebook must be a path relative to the server root, not {path!r}", "notebook"
        )
    if ".." in posix.parts:
        raise ApiError(400, "invalid_value", f"notebook path {path!r} leaves the server root", "notebook")
    full = (root / posix).resolve()
    if not full.is_relative_to(root):
        raise ApiError(
            400, "invalid_value", f"notebook path {path!r} leaves the server root (through a link)", "notebook"
        )
    if not full.is_file():
        raise ApiError(400, "not_found", f"no notebook at {path!r} under the server root", "notebook")
    if full.suffix != ".ipynb":
        raise ApiError(400, "invalid_value", f"{path!r} is not a notebook (.ipynb)", "notebook")
    try:
        nbformat.read(str(full), as_version=4)
    except Exception as exc:
        raise ApiError(
            400, "invalid_value", f"{path!r} is not a readable notebook: {str(exc)[:200]}", "notebook"
        ) from None
    return full.relative_to(root).as_posix()
