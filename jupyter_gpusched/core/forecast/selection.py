"""Model selection by backtest, per series and per horizon, on the training window only.

`select` backtests every candidate model on the last days of the window it is given
(`SELECT_SPAN_S`; one origin an hour, each candidate fitted once on what came before the
first origin and run forward over the data up to each origin), adds the median of the best
`ENSEMBLE_SIZE` candidates, and picks the lowest mean MASE; a challenger replaces the
default (`DEFAULT_MODEL`, ``revert``: the latest demand pulled toward the week's median, and
moved along its daily shape where it has one; the latest demand held where the window is under
a week) only when it beats it by `SELECT_MARGIN` on
average and is better in two independent outcomes in three, because a few days of origins
rank close models by chance. An hour ahead, hourly origins are apart and each is an outcome;
a day ahead they share all but an hour of what they forecast, so six days of them are about
five outcomes, not 120 (the means of horizon-long blocks of origins), and a one-sided t-test
over those few must say so too (`SELECT_ALPHA`). Prophet is a candidate once
the candidates' fit window spans two weeks (its weekly season; on a shorter window its daily
shape is what seasonal-naive and the ensemble already offer, at a tenth of the cost). `SelectedModel` is the served
forecast: the chosen model (or ensemble) refitted on the whole window, with a band of the
empirical quantiles of its own backtest errors at each lead time (split conformal), so the
band belongs to whichever model is selected. Nothing after the window is read.

`evaluate` is the evaluation the benchmarks and `forecast-eval` print: `backtest` over origins
spread across the whole series with ``auto`` (the selection, redone at every origin on the
training window before it) next to every candidate and the baselines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .backtest import BacktestResult, backtest, origin_errors
from .fitting import MIN_PROPHET_S, MIN_WEEKLY_S, fit_with_fallback
from .models import BASELINES, DEFAULT_INTERVAL, Fitted
from .revert import MIN_REVERT_S
from .series import DAY, Series, season_steps

__all__ = [
    "AUTO",
    "CANDIDATES",
    "DEFAULT_MODEL",
    "DEFAULT_SELECT_HORIZON",
    "ENSEMBLE",
    "ENSEMBLE_SIZE",
    "SELECT_ALPHA",
    "SELECT_MARGIN",
    "SELECT_SPAN_S",
    "SelectedModel",
    "Selection",
    "evaluate",
    "fit_selected",
    "select",
    "t_test_p",
]

AUTO = "auto"
ENSEMBLE = "ensemble"
CANDIDATES = ("revert", "latest", "time-of-day", "prophet-ar", "ets", "seasonal-naive", "last-value")
DEFAULT_MODEL = "revert"  # the latest demand pulled toward the week's median (core.forecast.revert)
SELECT_MARGIN = 0.05  # a challenger must backtest 5% better than the default to be served
ENSEMBLE_SIZE = 3
SELECT_SPAN_S = 6 * DAY  # the selection backtests on the last 6 days of the training window
SELECT_EVERY_S = 3600.0  # one selection origin an hour
MIN_FIT_S = 6 * 3600.0  # the non-seasonal candidates need 6 hours before the first selection origin
MIN_FIT_STEPS = 24  # and 24 buckets (a month of daily buckets is not fitted on 6 hours)
MIN_WINDOWS = 6  # the origins span at least 6 horizons (a long horizon: a longer span)
SELECT_CONSISTENCY = 2 / 3  # ... and is better in two independent outcomes in three
SELECT_ALPHA = 0.05  # ... and, where origins overlap (few outcomes), a one-sided t-test over them says so
DEFAULT_SELECT_HORIZON = 6  # steps, when a caller does not say (1 hour of 10-minute buckets)
# on a tie, the simpler model: the baselines first, the ensemble last
_PREFERENCE = ("last-value", "seasonal-naive", "time-of-day", "ets", "theta", "prophet-ar", "prophet", "mean", ENSEMBLE)


@dataclass
class Selection:
    """Which model serves one horizon of one series, and why: its backtest MASE next to the
    other candidates' (the baselines among them) on the same origins of the training window."""

    model: str  # a candidate's name, or "ensemble"
    members: tuple[str, ...]  # the ensemble's members (or the model alone)
    horizon: int
    mase: dict[str, float]  # candidate (and "ensemble") -> mean MASE over the selection origins
    origins: int
    span_s: float  # the stretch of the training window the origins cover
    errors: np.ndarray  # the served model's backtest errors (origins x horizon): the band
    forced: bool = False  # asked for by name rather than selected
    left_out: dict[str, str] = field(default_factory=dict)  # candidate -> why it could not run
    default: str = DEFAULT_MODEL  # what is served unless a challenger clearly beats it

    @property
    def why(self) -> str:
        f = lambda x: "n/a" if not math.isfinite(x) else f"{x:.2f}"  # noqa: E731
        base = ", ".join(f"{b} {f(self.mase.get(b, math.nan))}" for b in BASELINES if b != self.model)
        what = f"median of {', '.join(self.members)}" if self.model == ENSEMBLE else self.model
        if self.model == self.default:
            what += (
                f" (the default; a challenger must backtest {SELECT_MARGIN:.0%} better on average"
                " and be better in 2 independent outcomes in 3; where origins overlap, the outcomes are"
                f" horizon-long blocks, and a one-sided t-test at {SELECT_ALPHA:.0%} over them must say so too)"
            )
        return (
            f"{'as asked' if self.forced else 'selected'} {what}: backtest MASE {f(self.mase[self.model])} ({base}) over {self.origins} hourly origins"
            f" in the last {self.span_s / DAY:.1f} days of history"
            + "".join(f"; {name} left out: {why}" for name, why in self.left_out.items())
        )

    def to_dict(self) -> dict[str, Any]:
        clean = lambda x: round(float(x), 4) if math.isfinite(x) else None  # noqa: E731
        return {
            "model": self.model,
            "members": list(self.members),
            "horizon_steps": self.horizon,
            "origins": self.origins,
            "span_days": round(self.span_s / DAY, 2),
            "mase": {k: clean(v) for k, v in self.mase.items()},
            "baselines": {b: clean(self.mase.get(b, math.nan)) for b in BASELINES},
            "forced": self.forced,
            "left_out": dict(self.left_out),
            "why": self.why,
        }


def _rank(scores: dict[str, float]) -> list[str]:
    pref = {name: i for i, name in enumerate(_PREFERENCE)}
    return sorted(
        (k for k, v in scores.items() if math.isfinite(v)), key=lambda k: (round(scores[k], 6), pref.get(k, 99))
    )


def select(
    series: Series,
    lo: int,
    hi: int,
    horizon: int,
    candidates: Sequence[str] = CANDIDATES,
    cache: dict | None = None,
    force: str | None = None,
) -> Selection | None:
    """Backtest `candidates` on `series.values[lo:hi]` at `horizon` and pick the best (or the
    ensemble of the best few); `force` serves that candidate whatever the ranking (a model
    asked for by name, still scored against the others). None when the window is too short
    for one selection origin."""
    step = series.step_s
    every = max(1, int(round(SELECT_EVERY_S / step)))
    span = max(int(SELECT_SPAN_S / step), MIN_WINDOWS * horizon)
    # candidates fit on half a short window (6 hours and 24 buckets at least, 2 days at most:
    # enough for Prophet), on everything before the last `span` of a long one
    least = max(int(MIN_FIT_S / step), MIN_FIT_STEPS)
    fit = min(max((hi - lo) // 2, least), max(int(MIN_PROPHET_S / step), least))
    first = max(lo + fit, hi - span)
    origins = list(range(first, hi - horizon + 1, every))
    if not origins:
        return None
    fit_s = (first - lo) * step
    seasonal = step < DAY / 2  # a daily season needs buckets shorter than a day
    candidates = [
        c
        for c in candidates
        if c == force
        or not (c.startswith("prophet") and (fit_s < MIN_WEEKLY_S or not seasonal))
        and not (c in ("seasonal-naive", "time-of-day") and (fit_s < DAY or not seasonal))
        and not (c == "revert" and (hi - lo) * step < MIN_REVERT_S)  # the week's median needs a week
    ]
    window = series.head(hi)  # nothing after the window
    bt = backtest(
        window,
        horizon,
        candidates,
        origins=origins,
        train=first - lo,
        refit_every=hi,  # one fit per candidate, at the first origin
        fits_cache=cache,
        calibrate=False,
        keep=True,
        point_only=True,
        scale_lo=lo,  # MASE scaled by the window up to the last origin, as the evaluation does
    )
    # a candidate whose library is missing or whose fit failed ran as a baseline: leave it out
    scores = {m: s.mase for m, s in bt.models.items() if m not in bt.notes}
    ranked = _rank(scores)
    if not ranked:
        return None
    points = dict(bt.points)
    members = tuple(ranked[:ENSEMBLE_SIZE])
    per_origin = {m: bt.models[m].per_origin for m in bt.models}
    if len(members) == ENSEMBLE_SIZE:
        points[ENSEMBLE] = np.median(np.stack([bt.points[m] for m in members]), axis=0)
        per_origin[ENSEMBLE] = origin_errors(bt.actual, points[ENSEMBLE], bt.scales)
        err = per_origin[ENSEMBLE][np.isfinite(per_origin[ENSEMBLE])]
        scores[ENSEMBLE] = float(err.mean()) if len(err) else math.nan
    best = _rank(scores)[0]
    default = DEFAULT_MODEL if DEFAULT_MODEL in scores else "latest" if "latest" in scores else best
    # origins closer than a horizon share outcomes: where they do, the evidence is counted in
    # horizon-long blocks (independent outcomes)
    block = max(1, int(round(horizon / every)))
    if best != default and not _beats_default(best, default, scores, per_origin, block):
        best = default
    if force is not None and force in points:
        best = force
    return Selection(
        model=best,
        members=members if best == ENSEMBLE else (best,),
        horizon=horizon,
        mase=scores,
        origins=len(origins),
        span_s=(hi - first) * step,
        errors=bt.actual - points[best],
        forced=force is not None and best == force,
        left_out=dict(bt.notes),
        default=default,
    )


def _beats_default(
    name: str, default_name: str, scores: dict[str, float], per_origin: dict[str, np.ndarray], block: int = 1
) -> bool:
    """A challenger is served only when it backtests `SELECT_MARGIN` better than the default
    on average and is better in `SELECT_CONSISTENCY` of the independent outcomes (not by one
    lucky day). An hour ahead the hourly origins are the outcomes, over a hundred of them on a
    week of history. Where origins overlap (`block` > 1 origins to a horizon) the outcomes are
    the means of horizon-long blocks of origins, so five days of hourly origins a day ahead
    are five outcomes, not 120; so few that winning 4 of 5 can be chance, so a one-sided
    t-test on the challenger's MASE less the default's over them must also put the gain at
    `SELECT_ALPHA` or below. (Counted by origin, a model that gains a lot at a few hours of
    each day and loses a little at the rest, as arrival counts that follow the clock do,
    looked worse at most origins.) With one outcome there is no spread to test against: it
    must be better at every origin."""
    default = scores.get(default_name, math.nan)
    if not math.isfinite(default):
        return True
    if scores[name] > (1 - SELECT_MARGIN) * default:
        return False
    a, d = per_origin[name], per_origin[default_name]
    ok = np.isfinite(a) & np.isfinite(d)
    diff = _blocks(np.where(ok, a - d, math.nan), block)
    diff = diff[np.isfinite(diff)]
    if len(diff) < 2:  # one outcome (under two horizons of origins): no spread to test, so every origin
        return bool(ok.any() and np.all(a[ok] < d[ok]))
    if float(np.mean(diff < 0)) < SELECT_CONSISTENCY:
        return False
    return block <= 1 or t_test_p(diff) <= SELECT_ALPHA


def _blocks(x: np.ndarray, size: int) -> np.ndarray:
    """Means (of the finite values) of consecutive blocks of `size` origins, the last block
    ending at the last origin (a partial block at the start is dropped; fewer origins than a
    block are one block). NaN for a block with no finite value."""
    if size <= 1:
        return x
    n = max(1, len(x) // size)
    x = x[max(0, len(x) - n * size) :]
    parts = np.array_split(x, n)
    return np.array([float(p[np.isfinite(p)].mean()) if np.isfinite(p).any() else math.nan for p in parts])


def t_test_p(diff: np.ndarray) -> float:
    """One-sided t-test that the mean of `diff` is below 0: the chance of a mean this low or
    lower were it 0 (Student's t, n - 1 degrees of freedom; 1.0 under two values). Identical
    values have no spread: 0.0 if below 0, else 1.0."""
    n = len(diff)
    if n < 2:
        return 1.0
    mean, sd = float(diff.mean()), float(diff.std(ddof=1))
    if not sd > 0:
        return 0.0 if mean < 0 else 1.0
    return _t_below(mean / (sd / math.sqrt(n)), n - 1)


def _t_below(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom: its density integrated
    numerically (pure math; no scipy in the core)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    x = np.linspace(0.0, abs(t), 2001)
    f = c * (1 + x * x / df) ** (-(df + 1) / 2)
    inner = float(np.sum((f[1:] + f[:-1]) * np.diff(x)) / 2)  # the trapezoid rule from 0 to |t|
    return 0.5 - inner if t < 0 else 0.5 + inner


class SelectedModel(Fitted):
    """The served forecast: `selection`'s model (or the median of its members) fitted on
    `series.values[lo:hi]`, with the band of its own backtest errors."""

    def __init__(self, series: Series, lo: int, hi: int, selection: Selection, cache: dict | None = None):
        super().__init__(series, lo, hi, season_steps(series.step_s))
        self.selection = selection
        self.model = selection.model
        self.members: list[Fitted] = []
        self.notes: list[str] = []
        for name in selection.members:
            fitted, note = fit_with_fallback(name, "", series, lo, hi, cache)
            self.members.append(fitted)
            if note:
                self.notes.append(note)
        self.fit_s = sum(m.fit_s for m in self.members)

    def point(self, history, horizon):
        pts = [np.nan_to_num(m.point(history, horizon), nan=0.0) for m in self.members]
        return pts[0] if len(pts) == 1 else np.median(np.stack(pts), axis=0)

    def band(self, horizon, interval):
        """Per lead time, the `interval` quantiles of the backtest errors (widths never shrink
        with the lead time); leads past the backtested horizon take the last one's."""
        key = (horizon, interval)
        if key not in self._band:
            e = self.selection.errors
            q = np.nanquantile(e, [(1 - interval) / 2, (1 + interval) / 2], axis=0) if e.size else np.zeros((2, 1))
            q = np.nan_to_num(q, nan=0.0)
            lo = np.minimum.accumulate(np.minimum(q[0], 0.0))
            hi = np.maximum.accumulate(np.maximum(q[1], 0.0))
            idx = np.minimum(np.arange(horizon), len(lo) - 1)
            self._band[key] = (lo[idx], hi[idx])
        return self._band[key]

    def errors(self, horizon):
        return self.selection.errors


def fit_selected(
    series: Series,
    lo: int,
    hi: int,
    horizon: int,
    cache: dict | None = None,
    force: str | None = None,
) -> tuple[SelectedModel | None, Selection | None]:
    """Select on `series.values[lo:hi]` at `horizon`, then fit the choice on the same window.
    With `force` (a model asked for by name): that model, scored against the baselines."""
    candidates = CANDIDATES if force in (None, ENSEMBLE) else tuple(dict.fromkeys((force, *BASELINES)))
    sel = select(series, lo, hi, horizon, candidates, cache, force)
    if sel is None:
        return None, None
    return SelectedModel(series, lo, hi, sel, cache), sel


def evaluate(
    series: Series,
    horizon: int,
    models: Sequence[str] = (AUTO, *CANDIDATES),
    *,
    train: int | None = None,
    count: int = 50,
    first_origin: int | None = None,
    origins: Sequence[int] | None = None,
    interval: float = DEFAULT_INTERVAL,
    fits_cache: dict | None = None,
    served: list[str] | None = None,
) -> BacktestResult:
    """`backtest` at `count` origins spread over the whole series (after `first_origin`,
    default a week), every model fitted on the `train` steps before each origin; ``auto`` is
    the served forecast: selection plus fit, redone at every origin on that window only;
    ``ensemble`` the median of the best few candidates there, served whatever the ranking.
    Bands are the models' own (no calibration on the evaluation's origins). `served`, when
    given, collects the model ``auto`` served at each fit."""
    cache = {} if fits_cache is None else fits_cache

    def fitter(name: str, s: Series, lo: int, hi: int, c: dict) -> tuple[Fitted, str]:
        if name not in (AUTO, ENSEMBLE):
            return fit_with_fallback(name, "", s, lo, hi, c)
        chosen, _ = fit_selected(s, lo, hi, horizon, c, force=None if name == AUTO else ENSEMBLE)
        fitted: Fitted = chosen if chosen is not None else fit_with_fallback("latest", "", s, lo, hi, c)[0]
        if name == AUTO and served is not None:
            served.append(fitted.model)
        return fitted, ""

    return backtest(
        series,
        horizon,
        models,
        origins=origins,
        first_origin=first_origin,
        count=count,
        train=train,
        interval=interval,
        fits_cache=cache,
        calibrate=False,
        fitter=fitter,
    )
