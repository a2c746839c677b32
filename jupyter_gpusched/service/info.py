"""What the service knows of a job beyond the core's record: its folder and its runner's news."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass
class JobInfo:
    job_dir: str | None = None  # the job's folder (log, executed notebook); None: not made yet
    heartbeat_at: float | None = None  # when the runner last gave a sign of life
    progress: list[int] | None = None  # [code cells done, code cells in total], when known
    message: str = ""  # the last word on the job: its error, or why it could not start
    launch_failures: int = 0  # failed launches in a row (infrastructure), counted apart from max_retries

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> JobInfo:
        """From the store's JSON (keys it does not know, from other versions, are ignored)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
