"""Runtime estimates learned from finished jobs (no oracle, no clock).

`RuntimeHistory` keeps the run times of the last `per_key` succeeded runs under four keys, from
most to least specific:

    owner + notebook + gpus  ->  owner + notebook  ->  tenant + gpus  ->  tenant

A job's estimate is the `quantile` (80th percentile, nearest rank) of the most specific key that
has at least `min_samples` runs, with that key's level (`basis`) and sample count. At most
`max_keys` keys are kept; the one updated longest ago goes first. The live service feeds it from
its store (service/estimates.py) and the simulator from its replay (sim/engine.py, `estimates:
learned`); in both a queued job's estimate follows the runs that finish while it waits (the
simulator through `QueuedEstimates`) and is fixed once it starts: a job's own run time never
estimates itself.

A run's time is its GPU service divided by its GPUs (`observed_runtime`): every attempt's
running time, without queueing. Only succeeded runs count (a failed one says little of a good
run's length) and never a GPU kernel's reservation (interactive).
"""

from __future__ import annotations

import math
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from .model import Job, JobSpec, JobState

# Key levels, most specific first (the `basis` of an estimate).
BASES: tuple[str, ...] = ("owner+notebook+gpus", "owner+notebook", "tenant+gpus", "tenant")
_SEP = "\x1f"  # between a key's parts: never in a user, tenant or path a store keeps


@dataclass(frozen=True, slots=True)
class Estimate:
    seconds: float
    basis: str  # one of BASES
    samples: int


def history_keys(spec: JobSpec) -> tuple[tuple[str, str], ...]:
    """(basis, key) pairs for a job, most specific first."""
    g = str(spec.gpus)
    return (
        (BASES[0], _SEP.join((BASES[0], spec.owner, spec.notebook, g))),
        (BASES[1], _SEP.join((BASES[1], spec.owner, spec.notebook))),
        (BASES[2], _SEP.join((BASES[2], spec.tenant, g))),
        (BASES[3], _SEP.join((BASES[3], spec.tenant))),
    )


def observed_runtime(job: Job) -> float | None:
    """The run time a finished job teaches (seconds), or None when it teaches nothing."""
    if job.state is not JobState.SUCCEEDED or job.spec.interactive or job.gpus <= 0:
        return None
    seconds = job.attained_gpu_s / job.gpus
    if seconds <= 0 and job.started_at is not None and job.finished_at is not None:
        seconds = job.finished_at - job.started_at
    return seconds if seconds > 0 and math.isfinite(seconds) else None


def quantile(values: Iterable[float], q: float) -> float:
    """Nearest-rank quantile (q in (0, 1]) of a non-empty collection."""
    s = sorted(values)
    return s[max(0, math.ceil(q * len(s)) - 1)]


class RuntimeHistory:
    def __init__(self, per_key: int = 32, max_keys: int = 20_000, min_samples: int = 2, q: float = 0.8):
        if per_key < 1 or max_keys < 4 or min_samples < 1 or not 0 < q <= 1:
            raise ValueError("per_key >= 1, max_keys >= 4, min_samples >= 1 and 0 < q <= 1")
        self.per_key = per_key
        self.max_keys = max_keys
        self.min_samples = min_samples
        self.q = q
        self._runs: OrderedDict[str, deque[float]] = OrderedDict()  # oldest update first

    def __len__(self) -> int:
        return len(self._runs)

    def observe(self, spec: JobSpec, seconds: float) -> list[str]:
        """Learn one run's time; returns the keys it changed (for a store to write)."""
        if not (seconds > 0 and math.isfinite(seconds)):
            return []
        changed = []
        for _, key in history_keys(spec):
            self._append(key, seconds)
            changed.append(key)
        self._evict()
        return changed

    def observe_job(self, job: Job) -> list[str]:
        seconds = observed_runtime(job)
        return [] if seconds is None else self.observe(job.spec, seconds)

    def _append(self, key: str, seconds: float) -> None:
        runs = self._runs.get(key)
        if runs is None:
            runs = self._runs[key] = deque(maxlen=self.per_key)
        else:
            self._runs.move_to_end(key)
        runs.append(seconds)

    def _evict(self) -> None:
        while len(self._runs) > self.max_keys:
            self._runs.popitem(last=False)

    def estimate(self, spec: JobSpec) -> Estimate | None:
        for basis, key in history_keys(spec):
            runs = self._runs.get(key)
            if runs is not None and len(runs) >= self.min_samples:
                return Estimate(quantile(runs, self.q), basis, len(runs))
        return None

    # --- for a store: the history as (key, runs) in update order, and back ---------------------
    def runs(self, key: str) -> list[float]:
        return list(self._runs.get(key, ()))

    def items(self) -> Iterator[tuple[str, list[float]]]:
        for key, runs in self._runs.items():
            yield key, list(runs)

    def load(self, items: Iterable[tuple[str, Iterable[float]]]) -> None:
        """Restore keys (oldest update first), keeping each key's last `per_key` runs."""
        for key, runs in items:
            kept = deque((float(x) for x in runs if x > 0 and math.isfinite(x)), maxlen=self.per_key)
            if kept:
                self._runs.pop(key, None)
                self._runs[key] = kept
        self._evict()


class QueuedEstimates:
    """Keeps queued jobs' `learned_runtime` current as runs finish, touching only the jobs whose
    estimate a finished run can change (those followed under one of the keys it updated): the
    simulator's driver. (The live service refreshes every queued job before each pass.)"""

    def __init__(self, history: RuntimeHistory, set_runtime: Callable[[Job, float | None], None]):
        self.history = history
        self._set_runtime = set_runtime  # Scheduler.set_learned_runtime: the queue refiles the job
        self._by_key: dict[str, dict[str, Job]] = {}  # key -> queued jobs whose estimate it may change

    def _set(self, job: Job) -> Estimate | None:
        est = self.history.estimate(job.spec)
        self._set_runtime(job, est.seconds if est is not None else None)
        return est

    def track(self, job: Job) -> None:
        """Give a queued job its estimate now and follow it: under its keys down to the one its estimate
        comes from (a less specific key no longer changes it)."""
        est = self._set(job)
        for basis, key in history_keys(job.spec):
            self._by_key.setdefault(key, {})[job.id] = job
            if est is not None and basis == est.basis:
                break

    def finished(self, job: Job) -> None:
        """Learn from a finished job and update the queued jobs its run may change."""
        for key in self.history.observe_job(job):
            for other in (self._by_key.pop(key, None) or {}).values():
                if other.state is JobState.QUEUED:
                    self.track(other)
