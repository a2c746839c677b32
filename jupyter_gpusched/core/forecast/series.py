"""The demand series: values on a regular grid of buckets, made from timed samples."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DAY",
    "DEFAULT_STEP_S",
    "SHAPE_DAYS",
    "WEEK",
    "Series",
    "daily_shape",
    "ffill",
    "regularize",
    "season_steps",
]

DAY = 86400.0
WEEK = 7 * DAY
DEFAULT_STEP_S = 600.0
SHAPE_DAYS = 7  # a daily shape: the median of the same time of day over the last 7 days


@dataclass(frozen=True)
class Series:
    """Values on a regular grid: `values[i]` is the mean over [start + i*step, start + (i+1)*step).
    NaN marks a bucket with no observation. `latest[i]` (optional) is the last sample in bucket
    i: where demand stood at the end of it, which a step inside the bucket leaves the mean short of."""

    start: float
    step_s: float
    values: np.ndarray
    latest: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not (self.step_s > 0 and math.isfinite(self.step_s)):
            raise ValueError("step_s must be a positive number of seconds")
        object.__setattr__(self, "values", np.asarray(self.values, dtype=float))
        if self.latest is not None:
            latest = np.asarray(self.latest, dtype=float)
            if latest.shape != self.values.shape:
                raise ValueError("latest must have one value per bucket")
            object.__setattr__(self, "latest", latest)

    def head(self, n: int) -> Series:
        """The first `n` buckets (what was known at the start of bucket n)."""
        return Series(self.start, self.step_s, self.values[:n], None if self.latest is None else self.latest[:n])

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
        return Series(
            self.time_of(cut), self.step_s, self.values[cut:], None if self.latest is None else self.latest[cut:]
        )


def regularize(
    times: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray, step_s: float = DEFAULT_STEP_S
) -> Series:
    """Bucket samples at epoch seconds `times` into a grid of `step_s` (aligned on multiples
    of `step_s`): the mean of each bucket, NaN where a bucket has no sample; `latest` holds
    each bucket's last sample."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    if t.shape != v.shape:
        raise ValueError("times and values must have the same length")
    keep = np.isfinite(t) & np.isfinite(v)
    order = np.argsort(t[keep], kind="stable")
    t, v = t[keep][order], v[keep][order]
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
    latest = np.full(n, np.nan)
    ends = np.flatnonzero(np.r_[idx[1:] != idx[:-1], True])  # sorted by time: each bucket's last sample
    latest[idx[ends]] = v[ends]
    return Series(b0 * step_s, step_s, out, latest)


def season_steps(step_s: float) -> int:
    return max(1, int(round(DAY / step_s)))


def ffill(y: np.ndarray) -> np.ndarray:
    """NaN replaced by the previous finite value (leading NaNs stay)."""
    ok = ~np.isnan(y)
    idx = np.where(ok, np.arange(len(y)), -1)
    np.maximum.accumulate(idx, out=idx)
    out = np.full(len(y), math.nan)
    has = idx >= 0
    out[has] = y[idx[has]]
    return out


def daily_shape(y: np.ndarray, m: int, upto: int) -> np.ndarray:
    """out[t] = median of the finite values among y[t - d*m], d = 1..SHAPE_DAYS (`m` buckets a
    day), for t < `upto` (NaN where there are none): the same time of day on the days before
    bucket t, also past the end of `y`."""
    days = np.full((SHAPE_DAYS, upto), math.nan)
    for d in range(1, SHAPE_DAYS + 1):
        src = y[: max(0, min(len(y), upto - d * m))]
        days[d - 1, d * m : d * m + len(src)] = src
    with warnings.catch_warnings():  # an all-NaN column is NaN, as documented
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(days, axis=0)
