"""Request parsing: turn a JSON body into submit arguments or a clear 4xx error.

Only shape and types are checked here, plus the notebook path (a server-root concern).
Whether a job can ever run (GPU counts, tenant limits) is the core's call (SpecError), and so
is the parameters' rule (`core/parameters.py`, which the runner applies again at launch).
Hostile input gets a 4xx too: JSON nested past what the parser can take, non-finite numbers,
NUL bytes and lone surrogates, over-long paths, link loops, numbers past every limit.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path, PurePosixPath
from typing import Any

import nbformat

from ..core.dependencies import WHEN_CHOICES
from ..core.parameters import ParametersTooLarge, check_parameters
from ..core.scheduler import SpecError
from ..core.spec_fields import (
    MAX_CPUS,
    MAX_DEPENDENCIES,
    MAX_GPU_TYPE_CHARS,
    MAX_MEMORY_MIB,
    MAX_RUNTIME_LIMIT,
    MAX_TENANT_CHARS,
)


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
    "checkpoint_interval",
    "preemptible",
    "max_retries",
    "gpu_type",
    "stall_timeout",
    "cpus",
    "memory",
    "notify",
    "after",
    "when",
    "interactive",
}
MAX_RETRIES_LIMIT = 10
KERNEL_LABEL = "kernel:"  # an interactive request's notebook: kernel:<kernel id>
MAX_SUBMIT_BYTES = 1024 * 1024  # a submit body; its parameters may be 64 KiB (core/parameters.py)
MAX_PATH_BYTES = 4096  # Linux's PATH_MAX and NAME_MAX: past them the OS refuses the name
MAX_NAME_BYTES = 255


def _not_finite(literal: str) -> float:
    raise ApiError(400, "invalid_value", f"{literal[:40]} is not a finite number; JSON numbers must be finite")


def _finite_float(literal: str) -> float:
    value = float(literal)
    return value if math.isfinite(value) else _not_finite(literal)


def parse_json_object(raw: bytes, limit: int = MAX_SUBMIT_BYTES) -> dict[str, Any]:
    if len(raw) > limit:
        raise ApiError(413, "too_large", f"the request body is {len(raw)} bytes; the limit is {limit}")
    try:
        body = json.loads(raw or b"null", parse_constant=_not_finite, parse_float=_finite_float)
    except RecursionError:
        raise ApiError(400, "bad_json", "the request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "bad_json", f"the request body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "bad_json", "the request body must be a JSON object")
    for key, value in body.items():  # no store or notebook file can hold a lone surrogate
        try:
            json.dumps([key, value], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            field = key if _is_text(key) else None
            raise ApiError(
                400, "invalid_value", "the request body has a lone surrogate (not Unicode text)", field
            ) from None
        except RecursionError:
            raise ApiError(400, "bad_json", "the request body is nested too deeply") from None
    return body


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def _optional_str(body: dict, field: str, max_chars: int) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _wrong_type(field, "a non-empty string", value)
    value = value.strip()
    if len(value) > max_chars:
        raise ApiError(400, "invalid_value", f"{field} is {len(value)} characters; the limit is {max_chars}", field)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ApiError(400, "invalid_value", f"{field} must not contain control characters", field)
    return value


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
    max_runtime = _seconds(body, "max_runtime")
    preemptible = body.get("preemptible", False)
    if not isinstance(preemptible, bool):
        raise _wrong_type("preemptible", "true or false", preemptible)
    interactive = _interactive(body, notebook, preemptible)
    return {
        "notebook": notebook.strip(),
        "gpus": _int(body, "gpus", 1, 1),
        "priority": priority.lower(),
        "tenant": _optional_str(body, "tenant", MAX_TENANT_CHARS),
        "parameters": parse_parameters(body.get("parameters", {})),
        "max_runtime": max_runtime,
        "checkpoint_interval": _seconds(body, "checkpoint_interval"),
        "preemptible": preemptible,
        "max_retries": _int(body, "max_retries", 2, 0, MAX_RETRIES_LIMIT),
        "gpu_type": _optional_str(body, "gpu_type", MAX_GPU_TYPE_CHARS),
        "stall_timeout": _seconds(body, "stall_timeout"),
        "cpus": _cpus(body),
        "memory": _int(body, "memory", 0, 0, MAX_MEMORY_MIB),
        "notify": body.get("notify"),  # checked by the service (service/notify_targets.py): 400 on bad targets
        **_dependencies(body),
        **({"interactive": True} if interactive else {}),
    }


def _interactive(body: dict[str, Any], notebook: str, preemptible: bool) -> bool:
    """`interactive`: a GPU kernel's reservation (a user's server under JupyterHub asks the hub service for
    its kernels' GPUs this way; docs/interactive.md). Its notebook is the label `kernel:<kernel id>`."""
    interactive = body.get("interactive", False)
    if not isinstance(interactive, bool):
        raise _wrong_type("interactive", "true or false", interactive)
    if not interactive:
        return False
    if preemptible:
        raise ApiError(
            400,
            "invalid_value",
            "an interactive request cannot be preemptible: it would lose the user's state",
            "preemptible",
        )
    if not notebook.startswith(KERNEL_LABEL) or len(notebook) == len(KERNEL_LABEL) or len(notebook) > 200:
        raise ApiError(400, "invalid_value", "an interactive request's notebook is 'kernel:<kernel id>'", "notebook")
    if body.get("after"):
        raise ApiError(400, "invalid_value", "an interactive request cannot wait for other jobs", "after")
    return True


def _dependencies(body: dict[str, Any]) -> dict[str, Any]:
    """`after` (job ids) and `when`; whether those jobs exist and are yours is the handler's check."""
    after = body.get("after") or []
    if not isinstance(after, list) or not all(isinstance(a, str) and 0 < len(a) <= 64 for a in after):
        raise _wrong_type("after", "a list of job ids", after)
    if len(after) > MAX_DEPENDENCIES:
        raise ApiError(400, "invalid_value", f"after may name at most {MAX_DEPENDENCIES} jobs", "after")
    when = body.get("when", "succeeded")
    if when not in WHEN_CHOICES:
        raise ApiError(400, "invalid_value", f"when must be one of {', '.join(WHEN_CHOICES)}", "when")
    return {"after": list(dict.fromkeys(after)), "when": when}


def _cpus(body: dict[str, Any]) -> float:
    value = body.get("cpus", 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong_type("cpus", "a number of CPUs", value)
    if not 0 <= value <= MAX_CPUS:
        raise ApiError(400, "invalid_value", f"cpus must be a number from 0 to {MAX_CPUS}", "cpus")
    return float(value)


def _seconds(body: dict[str, Any], name: str) -> float | None:
    """An optional positive number of seconds up to a year."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _wrong_type(name, "a number of seconds", value)
    if not 0 < value <= MAX_RUNTIME_LIMIT:  # exact even for a 400-digit whole number
        raise ApiError(
            400,
            "invalid_value",
            f"{name} must be a positive number of seconds up to {MAX_RUNTIME_LIMIT} (a year), not {str(value)[:40]}",
            name,
        )
    return float(value)


def parse_parameters(value: Any) -> dict[str, Any]:
    """Papermill parameters, by the core's rule (the one the runner applies at launch)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _wrong_type("parameters", "an object of name: value", value)
    try:
        return check_parameters(value)
    except ParametersTooLarge as err:
        raise ApiError(413, "too_large", err.message, err.field) from None
    except SpecError as err:
        raise ApiError(400, "invalid_value", err.message, err.field) from None


def check_gpu_type(gpu_type: str | None, known: set[str]) -> None:
    """A job may ask only for a GPU type some pool declares: one the cluster lacks would otherwise be
    ignored (on a pool with no declared type) or never run."""
    if gpu_type is None or gpu_type in known:
        return
    has = (
        f"this cluster has: {', '.join(sorted(known))}"
        if known
        else "this cluster's pools declare no GPU type (leave gpu_type out, or set one in c.GPUSched.pools)"
    )
    raise ApiError(400, "invalid_value", f"unknown gpu_type {gpu_type!r}; {has}", "gpu_type")


def _check_path_text(path: str) -> None:
    """A path the OS can take: no NUL, valid Unicode, within PATH_MAX and NAME_MAX."""
    if "\x00" in path:
        raise ApiError(400, "invalid_value", "notebook path contains a NUL character", "notebook")
    if not _is_text(path):
        raise ApiError(400, "invalid_value", "notebook path is not valid Unicode text (a lone surrogate)", "notebook")
    encoded = path.encode("utf-8")
    if len(encoded) > MAX_PATH_BYTES:
        raise ApiError(
            400, "invalid_value", f"notebook path is {len(encoded)} bytes; the limit is {MAX_PATH_BYTES}", "notebook"
        )
    if any(len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")):
        raise ApiError(400, "invalid_value", f"a name in the notebook path is over {MAX_NAME_BYTES} bytes", "notebook")


def resolve_notebook(root_dir: str | Path, path: str) -> str:
    """The notebook's path relative to the server root, checked to exist, to be a notebook,
    and to stay inside the root (no `..`, no absolute path, no symlink out)."""
    _check_path_text(path)
    root = Path(root_dir).resolve()
    posix = PurePosixPath(path.replace("\\", "/"))
    if posix.is_absolute() or (len(path) > 1 and path[1] == ":"):
        raise ApiError(
            400, "invalid_value", f"notebook must be a path relative to the server root, not {path!r}", "notebook"
        )
    if ".." in posix.parts:
        raise ApiError(400, "invalid_value", f"notebook path {path!r} leaves the server root", "notebook")
    try:
        full = Path(os.path.realpath(root / posix, strict=True))
        is_file = full.is_file()
    except (FileNotFoundError, NotADirectoryError):
        raise ApiError(400, "not_found", f"no notebook at {path!r} under the server root", "notebook") from None
    except (OSError, RuntimeError) as exc:  # a link loop, a resolved path too long, no permission
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ApiError(
            400, "invalid_value", f"notebook path {path!r} cannot be resolved: {reason}", "notebook"
        ) from None
    if not full.is_relative_to(root):
        raise ApiError(
            400, "invalid_value", f"notebook path {path!r} leaves the server root (through a link)", "notebook"
        )
    if not is_file:
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
