"""`jupyter gpusched forecast-eval`: backtest the demand forecaster on any series.

    jupyter gpusched forecast-eval --series usage.csv --time-col time --value-col gpus --horizon 60
    jupyter gpusched forecast-eval --series usage.csv --time-col time --value-col gpus --horizon 1440 --json out.json

It runs the evaluation the benchmarks run (jupyter_gpusched.core.forecast.evaluate): forecast
origins spread evenly over the whole series (50 by default, from a week in), every model
fitted only on the history before each origin, and prints one table: ``auto`` (the forecast
the server serves: a model selected by backtest on that history, or the ensemble), every
candidate model, the ensemble and the two baselines, with MASE (mean, median and worst over
the origins), sMAPE, band coverage and fit time, then which model ``auto`` served how often.
`--horizon` counts steps of the series as given; series finer than 10 minutes are evaluated
on 10-minute means (say so with --step to change it).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ..core.forecast import (
    AUTO,
    CANDIDATES,
    DAY,
    DEFAULT_INTERVAL,
    DEFAULT_STEP_S,
    ENSEMBLE,
    MODELS,
    BacktestResult,
    Series,
    evaluate,
    regularize,
)

DEFAULT_MODELS = (AUTO, *CANDIDATES, ENSEMBLE)
KNOWN_MODELS = (AUTO, ENSEMBLE, *MODELS)


class SeriesError(ValueError):
    pass


def load_series(path: str | Path, time_col: str, value_col: str) -> tuple[np.ndarray, np.ndarray]:
    """(epoch seconds, values) from a CSV (or .csv.gz). The time column holds date-times
    (read as UTC) or numbers of seconds. Rows with a missing value are dropped."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise SeriesError(f"{path}: no such file")
    try:
        df = pd.read_csv(p, usecols=lambda c: c in (time_col, value_col))
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise SeriesError(f"{path}: cannot read it as CSV ({exc})") from None
    for col, what in ((time_col, "--time-col"), (value_col, "--value-col")):
        if col not in df.columns:
            raise SeriesError(f"{path}: no column {col!r} (given as {what})")
    if len(df) == 0:
        raise SeriesError(f"{path}: no rows")
    raw_t = df[time_col]
    if pd.api.types.is_numeric_dtype(raw_t):
        t = raw_t.to_numpy(dtype=float)
    else:
        ts = pd.to_datetime(raw_t, errors="coerce", utc=True)
        bad = ts.isna() & raw_t.notna()
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise SeriesError(f"{path}, line {line}, column {time_col!r}: not a date-time: {raw_t[bad].iloc[0]!r}")
        t = (ts - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
    v = pd.to_numeric(df[value_col], errors="coerce")
    bad = v.isna() & df[value_col].notna()
    if bad.any():
        line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
        raise SeriesError(f"{path}, line {line}, column {value_col!r}: not a number: {df[value_col][bad].iloc[0]!r}")
    keep = ~(np.isnan(t) | v.isna().to_numpy())
    return t[keep], v.to_numpy(dtype=float)[keep]


def native_step(t: np.ndarray) -> float:
    d = np.diff(np.unique(t))
    if len(d) == 0:
        raise SeriesError("the series needs at least two distinct times")
    return float(np.median(d))


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}f}"


def _grid(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def result_table(bt: BacktestResult) -> str:
    rows = []
    for name, m in bt.models.items():
        rows.append(
            [
                name,
                _fmt(m.mase),
                _fmt(m.mase_median),
                _fmt(m.mase_worst),
                _fmt(m.smape, 2),
                _fmt(m.coverage, 2),
                _fmt(m.fit_s),
                str(m.fits),
            ]
        )
    header = ["model", "MASE", "median", "worst", "sMAPE %", f"in {int(DEFAULT_INTERVAL * 100)}% band", "fit s", "fits"]
    return _grid(header, rows)


def _duration(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:g} min"
    if seconds < 2 * DAY:
        return f"{seconds / 3600:g} h"
    return f"{seconds / DAY:g} days"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jupyter gpusched forecast-eval",
        description="Backtest the GPU-demand forecaster on a series (rolling origins): MASE and sMAPE of the "
        "forecaster against seasonal-naive and last-value baselines.",
    )
    p.add_argument(
        "--series", required=True, metavar="FILE.csv", help="CSV file (or .csv.gz) with a time and a value column"
    )
    p.add_argument("--time-col", required=True, metavar="COL", help="date-times, or seconds")
    p.add_argument("--value-col", required=True, metavar="COL", help="the demand (e.g. GPUs requested)")
    p.add_argument("--horizon", required=True, type=int, metavar="STEPS", help="how far ahead, in steps of the series")
    p.add_argument("--json", metavar="OUT.json", help="also write the figures as JSON")
    p.add_argument(
        "--step",
        type=float,
        metavar="SECONDS",
        help="evaluate on means over buckets of this many seconds (default: the series' step, or 600 if it is finer)",
    )
    p.add_argument(
        "--origins", type=int, default=50, help="forecast origins, spread evenly over the series (default 50)"
    )
    p.add_argument(
        "--first-days",
        type=float,
        default=7.0,
        help="history before the first origin (default 7 days, or half the series)",
    )
    p.add_argument(
        "--train-days", type=float, default=14.0, help="history each fit sees before its origin (default 14)"
    )
    p.add_argument(
        "--models", default=",".join(DEFAULT_MODELS), help=f"comma-separated, from {', '.join(KNOWN_MODELS)}"
    )
    return p


def forecast_eval_main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except SeriesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, out=None) -> int:
    out = out or sys.stdout
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in KNOWN_MODELS]
    if unknown or not models:
        raise SeriesError(f"unknown model(s) {', '.join(unknown) or '(none)'}; use some of {', '.join(KNOWN_MODELS)}")
    if args.horizon < 1:
        raise SeriesError("--horizon must be at least 1 step")
    if args.origins < 1:
        raise SeriesError("--origins must be at least 1")
    if not args.train_days > 0:
        raise SeriesError("--train-days must be positive")
    if not args.first_days > 0:
        raise SeriesError("--first-days must be positive")
    t, v = load_series(args.series, args.time_col, args.value_col)
    step0 = native_step(t)
    step = args.step or max(step0, DEFAULT_STEP_S)
    if step < step0:
        raise SeriesError(f"--step {step:g} s is finer than the series' own step ({step0:g} s)")
    horizon = max(1, math.ceil(args.horizon * step0 / step))
    series = regularize(t, v, step)
    train = max(1, int(round(args.train_days * DAY / step)))
    n = len(series)
    if n <= horizon:
        raise SeriesError(f"the series ({n} steps of {step:g} s) is shorter than the horizon ({horizon} steps)")
    first = min(int(round(args.first_days * DAY / step)), n // 2)
    served: list[str] = []
    bt = evaluate(series, horizon, models, train=train, first_origin=first, count=args.origins, served=served)
    if not bt.origins:
        raise SeriesError(f"the series ({n} steps of {step:g} s) has no origin with a full horizon after it")
    print(
        f"{args.series} [{args.value_col}]: {series.observed} points at {_duration(step)} "
        f"({_duration(series.span_s)}); horizon {args.horizon} x {_duration(step0)} = {_duration(horizon * step)}"
        + (f" ({horizon} steps of {_duration(step)})" if step != step0 else "")
        + f"; {len(bt.origins)} origins spread from {_duration(bt.origins[0] * step)} in, each model fitted on up to"
        f" {_duration(train * step)} before its origin",
        file=out,
    )
    print(result_table(bt), file=out)
    if served:
        counts = ", ".join(f"{k} at {v}" for k, v in Counter(served).most_common())
        print(f"auto served: {counts} of {len(served)} origins (selected on each origin's own history)", file=out)
    for name, note in bt.notes.items():
        print(f"note ({name}): {note}", file=out)
    if args.json:
        doc = {
            "series": str(args.series),
            "value_col": args.value_col,
            "step_s": step,
            "horizon_steps": horizon,
            "origins": len(bt.origins),
            "models": {
                k: {
                    kk: vv
                    for kk, vv in m.to_dict().items()
                    if kk in ("mase", "mase_median", "mase_worst", "smape", "fit_s", "coverage")
                }
                for k, m in bt.models.items()
            },
            "served": dict(Counter(served)),
            "notes": dict(bt.notes),
        }
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {args.json}", file=out)
    return 0


def helios_series(path: str | Path, column: str = "requested") -> Series:
    """A Helios Earth VC file (cluster_sequence_vc.csv.gz) as 10-minute means of GPUs
    requested (running + pending) or allocated (running)."""
    import pandas as pd

    df = pd.read_csv(path, usecols=["time", "running_gpu_num", "pending_gpu_num"])
    t = (pd.to_datetime(df["time"]) - pd.Timestamp(0)).dt.total_seconds().to_numpy(dtype=float)
    y = df["running_gpu_num"].to_numpy(dtype=float)
    if column == "requested":
        y = y + df["pending_gpu_num"].to_numpy(dtype=float)
    return regularize(t, y, DEFAULT_STEP_S)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(forecast_eval_main(sys.argv[1:]))
