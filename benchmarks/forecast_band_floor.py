"""How low can an 80% band's coverage go an hour ahead on the Helios VCs?

A band that contains its own point forecast covers every bucket the point forecast gets exactly
right. An hour ahead most 10-minute buckets do not change, so `revert` (the model served at
almost every origin an hour ahead) is exactly right on a large share of them; on a series
where that share is above 80%, no such band can cover less. This prints, per VC, that share
over the evaluation's 50 origins (`benchmarks/forecast_eval.py`'s origins and 14-day fits) and
the least mean coverage any band containing its point could reach: max(share, 0.80) per
series, averaged.

    .venv/bin/python benchmarks/forecast_band_floor.py
"""

from __future__ import annotations

import sys

import numpy as np

from jupyter_gpusched.core import forecast as F

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from forecast_eval import DEFAULT_TRACES, HELD_OUT_VCS, helios_vcs  # noqa: E402


def main() -> int:
    floors = []
    print(f"{'series':8s}  exact share  least coverage")
    for name, s in helios_vcs(DEFAULT_TRACES, None):
        origins = F.spread_origins(len(s), 144, 7 * 144, 50)
        exact = total = 0
        for o in origins:
            p = F.fit("revert", s, max(0, o - 14 * 144), o).predict(s.values[:o], 6, None)[0]
            e = s.values[o : o + 6] - p
            ok = np.isfinite(e)
            exact += int(np.count_nonzero(np.abs(e[ok]) < 1e-9))
            total += int(ok.sum())
        share = exact / total
        floors.append(max(share, 0.8))
        print(f"{name + ('*' if name in HELD_OUT_VCS else ''):8s}  {share:11.2f}  {max(share, 0.8):14.2f}")
    print(f"mean least coverage of an 80% band containing its point, 1 h ahead: {np.mean(floors):.3f}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
