"""The demand series: values on a regular grid of buckets, made from timed samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["DAY", "DEFAULT_STEP_S", "WEEK", "Series", "regularize", "season_steps"]

DAY = 86400.0
WEEK = 7 * DAY
DEFAULT_STEP_S = 600.0


@dataclass(frozen=True)
class Series:
    """Values on a regular grid: `values[i]` is the mean over [start + i*step, start + (i+1)*step).
    NaN marks a bucket with no observation."""

    start: float
    step_s: float
    values: np.ndarray

    def __post_init__(self) -> None:
        if not (self.step_s > 0 and math.isfinite(self.step_s)):
            raise ValueError("step_s must be a positive number of seconds")
        object.__setattr__(self, "values", np.asarray(self.values, dtype=float))

    def __len__(self) -> int:
        return len(self.values)

    @property
    def times(self) -> np.ndarray:
        return self.start + self.step_s * np.arange(len(self.values))

    def time_of(self, index: int) -> float:
        return self.start + self.step_s * index

    @property
    def observed(self) -> int:
        return int(np.count_nonzero(~np.isnan(self.values)))

    @property
    def span_s(self) -> float:
        """Seconds from the first to the end of the last observed bucket."""
        ok = np.flatnonzero(~np.isnan(self.values))
        return 0.0 if len(ok) == 0 else float((ok[-1] - ok[0] + 1) * self.step_s)

    def tail(self, seconds: float) -> Series:
        """The last `seconds` of the series."""
        n = int(round(seconds / self.step_s))
        if n >= len(self.values):
            return self
        cut = len(self.values) - n
        return Series(self.time_of(cut), self.step_s, self.values[cut:])


def regularize(
    times: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray, step_s: float = DEFAULT_STEP_S
) -> Series:
    """Bucket samples at epoch seconds `times` into a grid of `step_s` (aligned on multiples
    of `step_s`): the mean of each bucket, NaN where a bucket has no sample."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.shape != v.shape:
        raise ValueError("times and values must have the same length")
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    if len(t) == 0:
        return Series(0.0, step_s, np.zeros(0))
    b = np.floor(t / step_s).astype(np.int64)
    b0 = int(b.min())
    idx = b - b0
    n = int(idx.max()) + 1
    sums = np.bincount(idx, weights=v, minlength=n)
    counts = np.bincount(idx, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return Series(b0 * step_s, step_s, out)


def season_steps(step_s: float) -> int:
    return max(1, int(round(DAY / step_s)))
