"""How low can an 80% band's coverage go on a set of series?

A band that contains its own point forecast covers every bucket the point forecast gets exactly
right. An hour ahead most 10-minute buckets of GPU demand do not change, and a count of arrivals
is often 0 at any lead, so `revert` (the model served at almost every origin) is exactly right
on a large share of them; on a series where that share is above 80%, no such band can cover
less. This prints, per series, that share over the evaluation's 50 origins
(`benchmarks/forecast_eval.py`'s origins and 14-day fits) and the least mean coverage any band
containing its point could reach: max(share, 0.80) per series, averaged. (`revert` stands in
for the served forecast: where a challenger is served instead, the share is an estimate.)

    .venv/bin/python benchmarks/forecast_band_floor.py                        # Helios VCs, 1 h ahead
    .venv/bin/python benchmarks/forecast_band_floor.py --set arrivals --horizon 144
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from jupyter_gpusched.core import forecast as F

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from forecast_eval import DEFAULT_TRACES, HELD_OUT_VCS, arrival_series, demand_series, helios_vcs  # noqa: E402

SETS = {
    "helios": lambda: helios_vcs(DEFAULT_TRACES, None),
    "arrivals": lambda: arrival_series(DEFAULT_TRACES),
    "demand": lambda: demand_series(DEFAULT_TRACES),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--set", choices=sorted(SETS), default="helios")
    p.add_argument("--horizon", type=int, default=6, help="10-minute steps ahead (default 6: 1 hour; 144: a day)")
    args = p.parse_args(argv)
    h = args.horizon
    if not 1 <= h <= 144:  # the evaluation's origins leave a day after each
        p.error("--horizon must be 1 to 144 steps")
    floors = []
    print(f"{'series':24s}  exact share  least coverage")
    for name, s in SETS[args.set]():
        origins = F.spread_origins(len(s), 144, 7 * 144, 50)  # forecast_eval.py's: the same at both horizons
        exact = total = 0
        for o in origins:
            p_ = F.fit("revert", s, max(0, o - 14 * 144), o).predict(s.values[:o], h, None)[0]
            e = s.values[o : o + h] - p_
            ok = np.isfinite(e)
            exact += int(np.count_nonzero(np.abs(e[ok]) < 1e-9))
            total += int(ok.sum())
        share = exact / total
        floors.append(max(share, 0.8))
        print(f"{name + ('*' if name in HELD_OUT_VCS else ''):24s}  {share:11.2f}  {max(share, 0.8):14.2f}")
    print(f"mean least coverage of an 80% band containing its point, {h * 10 / 60:g} h ahead: {np.mean(floors):.3f}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
