"""How well does the demand forecaster predict GPU demand 1 hour and 24 hours ahead?

Series: the 16 Helios Earth VCs (../shared/traces/sensetime_helios_2020/earth_vcs/), May
2020, one row a minute; the target is GPUs *requested* (running + pending), as the live
service records it, on 10-minute means (what the forecaster fits; see docs/forecasting.md).

Protocol (rolling origin, the same code as the server's skill, core.forecast.backtest):
each model is fitted on the 14 days before a fit point and refitted every 24 h from day 14;
24-hour forecasts are made at every fit point (17 origins per series: May 15 ... May 31),
1-hour forecasts every hour (408 origins per series) from the latest fit and the data up to
the origin, as the cached live forecaster does. MASE is scaled by the in-sample
seasonal-naive (one day) MAE of the 14 days before each origin, averaged over origins.

    .venv/bin/python benchmarks/forecast_eval.py                # all 16 VCs, both horizons
    .venv/bin/python benchmarks/forecast_eval.py --vcs vc6YE,vcMod --json out.json
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from jupyter_gpusched.cli.forecast_eval import _fmt, _grid, helios_series
from jupyter_gpusched.core import forecast as F

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
MODELS = ("prophet-ar", "prophet", "seasonal-naive", "last-value")
HORIZONS = {"1 h": (6, 6), "24 h": (144, 144)}  # label: (horizon steps, origin spacing), 10-min steps
TRAIN = 14 * 144
REFIT = 144


def evaluate(path: Path) -> dict:
    s = helios_series(path)
    cache: dict = {}
    out = {}
    for label, (h, every) in HORIZONS.items():
        bt = F.backtest(s, h, MODELS, first_origin=TRAIN, every=every, train=TRAIN, refit_every=REFIT, fits_cache=cache)
        out[label] = bt
    return out


def fit_timing(path: Path) -> dict:
    """Seconds to fit prophet-ar on one week, on 10-minute means and on raw minutes."""
    import pandas as pd

    df = pd.read_csv(path, usecols=["time", "running_gpu_num", "pending_gpu_num"])
    t = (pd.to_datetime(df["time"]) - pd.Timestamp(0)).dt.total_seconds().to_numpy(dtype=float)
    y = (df["running_gpu_num"] + df["pending_gpu_num"]).to_numpy(dtype=float)
    out = {}
    for label, step, repeats in (("10-min means", 600.0, 3), ("per minute", 60.0, 1)):
        s = F.regularize(t, y, step)
        week = int(7 * F.DAY / step)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            F.fit("prophet-ar", s, 0, week)
            times.append(time.perf_counter() - t0)
        out[label] = {"points": week, "fit_s": statistics.median(times)}
    return out


def _clean(o):
    if isinstance(o, dict):
        return {k: _clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_clean(v) for v in o]
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return o


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--traces", default=str(DEFAULT_TRACES))
    p.add_argument("--vcs", help="comma-separated VC names (default: all 16)")
    p.add_argument("--json", help="write every figure here")
    args = p.parse_args(argv)
    folder = Path(args.traces) / "sensetime_helios_2020" / "earth_vcs"
    files = sorted(folder.glob("*_cluster_sequence_vc.csv.gz"))
    if args.vcs:
        want = set(args.vcs.split(","))
        files = [f for f in files if f.name.split("_")[0] in want]
    if not files:
        print(f"no Helios Earth VC series under {folder}", file=sys.stderr)
        return 2
    wall0 = time.perf_counter()
    results = {}
    for f in files:
        vc = f.name.split("_")[0]
        t0 = time.perf_counter()
        results[vc] = evaluate(f)
        print(f"  {vc}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    timing = fit_timing(files[0])
    doc: dict = {
        "series": {},
        "summary": {},
        "fit_timing_one_week": timing,
        "protocol": {
            "target": "GPUs requested (running + pending), 10-minute means",
            "train_days": TRAIN / 144,
            "refit_every_h": REFIT / 6,
            "horizons": {k: {"steps": h, "origin_every_steps": e} for k, (h, e) in HORIZONS.items()},
        },
    }
    for label in HORIZONS:
        rows = []
        per_model: dict[str, list[float]] = {m: [] for m in MODELS}
        wins_sn = wins_lv = comparable = 0
        origins = 0
        for vc, res in results.items():
            bt = res[label]
            origins = len(bt.origins)
            ms = {m: bt.models[m] for m in MODELS}
            doc["series"].setdefault(vc, {})[label] = bt.to_dict()
            for m in MODELS:
                per_model[m].append(ms[m].mase)
            a, sn, lv = ms["prophet-ar"].mase, ms["seasonal-naive"].mase, ms["last-value"].mase
            if all(math.isfinite(x) for x in (a, sn, lv)):
                comparable += 1
                wins_sn += a < sn
                wins_lv += a < lv
            rows.append(
                [vc]
                + [_fmt(ms[m].mase) for m in MODELS]
                + [
                    _fmt(ms["prophet-ar"].smape, 1),
                    _fmt(ms["seasonal-naive"].smape, 1),
                    _fmt(ms["last-value"].smape, 1),
                ]
                + [
                    _fmt(ms["prophet-ar"].raw_coverage, 2),
                    _fmt(ms["prophet-ar"].coverage, 2),
                    _fmt(ms["prophet-ar"].fit_s, 2),
                ]
            )

        def agg(fn, xs):
            xs = [x for x in xs if math.isfinite(x)]
            return fn(xs) if xs else math.nan

        raw_cov = [r[label].models["prophet-ar"].raw_coverage for r in results.values()]
        cal_cov = [r[label].models["prophet-ar"].coverage for r in results.values()]
        rows.append(
            ["mean"]
            + [_fmt(agg(statistics.fmean, per_model[m])) for m in MODELS]
            + [""] * 3
            + [_fmt(agg(statistics.fmean, raw_cov), 2), _fmt(agg(statistics.fmean, cal_cov), 2), ""]
        )
        rows.append(["median"] + [_fmt(agg(statistics.median, per_model[m])) for m in MODELS] + [""] * 6)
        header = [
            "VC",
            *(f"MASE {m}" for m in MODELS),
            "sMAPE% p-ar",
            "sMAPE% s-naive",
            "sMAPE% last",
            "in 80% band (raw)",
            "(calibrated)",
            "fit s",
        ]
        print(
            f"\n### {label} ahead ({HORIZONS[label][0]} x 10 min; {origins} origins per series, 14-day fits refitted daily)\n"
        )
        print(_grid(header, rows))
        print(
            f"\nprophet-ar beats seasonal-naive on {wins_sn}/{comparable} series and last-value on {wins_lv}/{comparable}"
            f" (MASE; lower is better)."
        )
        doc["summary"][label] = {
            "mean_mase": {m: agg(statistics.fmean, per_model[m]) for m in MODELS},
            "median_mase": {m: agg(statistics.median, per_model[m]) for m in MODELS},
            "prophet_ar_beats_seasonal_naive": wins_sn,
            "prophet_ar_beats_last_value": wins_lv,
            "series": comparable,
            "prophet_ar_band_coverage_raw": agg(statistics.fmean, raw_cov),
            "prophet_ar_band_coverage_calibrated": agg(statistics.fmean, cal_cov),
        }
    fits = [r[label].models["prophet-ar"].fit_s for r in results.values() for label in HORIZONS]
    print(
        f"\nfit time: prophet-ar on a 14-day window (2,016 10-min points): median {statistics.median(fits):.2f} s,"
        f" max {max(fits):.2f} s; on one week: {timing['10-min means']['fit_s']:.2f} s on 10-min means"
        f" ({timing['10-min means']['points']} points), {timing['per minute']['fit_s']:.2f} s on raw minutes"
        f" ({timing['per minute']['points']} points). Whole run: {time.perf_counter() - wall0:.0f} s."
    )
    if args.json:
        Path(args.json).write_text(json.dumps(_clean(doc), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
