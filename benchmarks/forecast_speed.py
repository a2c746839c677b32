"""How long does the served forecast take: selection by backtest plus the fit, per tenant?

One Helios Earth VC (vc6YE, GPUs requested) on 10-minute means: a week (1,008 buckets, the
target's size) and 28 days (the server's longest history, where Prophet joins the candidates).
Prints, each in a fresh process, the import time of the model libraries and the first
forecast report (imports included: the server's first request after a start), then the
median of 3 warm runs of `forecast_report` (selection + fit + forecast) at 1 h and 24 h.

    .venv/bin/python benchmarks/forecast_speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = ROOT.parent / "shared" / "traces"
VC = "sensetime_helios_2020/earth_vcs/vc6YE_cluster_sequence_vc.csv.gz"


def fresh(code: str) -> float:
    """Seconds a fresh interpreter takes to run `code` (which prints them)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> int:
    traces = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_TRACES
    path = traces / VC
    if not path.is_file():
        print(f"series not found: {path}", file=sys.stderr)
        return 2
    imports = {
        "statsmodels (ETS, Theta)": "import statsmodels.tsa.holtwinters, statsmodels.tsa.forecasting.theta",
        "prophet": "import prophet",
    }
    for label, stmt in imports.items():
        took = fresh(f"import time; t = time.perf_counter(); {stmt}; print(time.perf_counter() - t)")
        print(f"import {label}: {took:.2f} s")
    setup = (
        "import time, numpy as np; np.seterr(all='ignore');"
        "from jupyter_gpusched.cli.forecast_eval import helios_series;"
        "from jupyter_gpusched.core import forecast as F;"
        f"s = helios_series({str(path)!r}).head(1008);"
    )
    first = fresh(setup + "t = time.perf_counter(); F.forecast_report(s, 6); print(time.perf_counter() - t)")
    print(f"first forecast in a fresh process (imports + selection + fit, a week, 1 h): {first:.2f} s")

    import numpy as np

    from jupyter_gpusched.cli.forecast_eval import helios_series
    from jupyter_gpusched.core import forecast as F

    np.seterr(all="ignore")
    full = helios_series(path)
    F.forecast_report(full.head(1008), 6)  # warm the imports
    for days in (7, 28):
        s = full.head(days * 144)
        for label, h in (("1 h", 6), ("24 h", 144)):
            times, model = [], ""
            for _ in range(3):
                t0 = time.perf_counter()
                rep = F.forecast_report(s, h)
                times.append(time.perf_counter() - t0)
                model = rep["model"]
            cands = ", ".join(k for k in rep["skill"]["selection"]["mase"] if k != "ensemble")
            print(
                f"{days:2d} days ({len(s)} buckets), {label:>4}: selection + fit + forecast median"
                f" {statistics.median(times):.2f} s (max {max(times):.2f}); served {model}; candidates {cands}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
