"""The job list's sort order and free-text filter (`GET jobs?sort=&order=&q=`), so the Lab Jobs
view can page through thousands of jobs in any column's order without fetching them all."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core import Job
from .validation import ApiError

# Sort key per column; a job without the value (not started, not finished) sorts last either way.
SORT_KEYS: dict[str, Callable[[Job], Any]] = {
    "created": lambda j: j.submitted_at,
    "started": lambda j: j.first_started_at,
    "finished": lambda j: j.finished_at,
    "notebook": lambda j: j.spec.notebook.rsplit("/", 1)[-1].lower(),
    "state": lambda j: j.state.value,
    "tenant": lambda j: j.spec.tenant,
    "priority": lambda j: int(j.spec.priority),
    "gpus": lambda j: j.spec.gpus,
    "owner": lambda j: j.spec.owner,
}
ORDERS = ("asc", "desc")


def check_sort(sort: str | None, order: str | None) -> tuple[str, str]:
    """The validated (column, order); the default is newest first."""
    # Absent means the default; anything given (an empty value too) must be one of the spec's values.
    sort = "created" if sort is None else sort
    if sort not in SORT_KEYS:
        raise ApiError(400, "invalid_value", f"unknown sort {sort!r}; use one of {', '.join(SORT_KEYS)}", "sort")
    order = "desc" if order is None else order
    if order not in ORDERS:
        raise ApiError(400, "invalid_value", f"unknown order {order!r}; use asc or desc", "order")
    return sort, order


def sort_jobs(jobs: Sequence[Job], sort: str, order: str) -> list[Job]:
    """Jobs in the column's order; ties (and missing values, always last) newest first."""
    key = SORT_KEYS[sort]
    newest_first = sorted(jobs, key=lambda j: j.seq, reverse=True)
    present = [j for j in newest_first if key(j) is not None]
    missing = [j for j in newest_first if key(j) is None]
    present.sort(key=key, reverse=order == "desc")  # stable: ties stay newest first
    return present + missing


def match_text(jobs: Sequence[Job], text: str | None) -> list[Job]:
    """Jobs whose id, notebook, owner, tenant or reason contains `text` (any case)."""
    needle = (text or "").strip().lower()
    if not needle:
        return list(jobs)
    return [
        j
        for j in jobs
        if any(needle in field.lower() for field in (j.id, j.spec.notebook, j.spec.owner, j.spec.tenant, j.reason))
    ]
