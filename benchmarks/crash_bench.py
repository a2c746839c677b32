"""Crash test over several kill points: does a `kill -9` of the server lose a job or run one twice?

For each kill point: a fresh data dir and a real `jupyter server` (4 virtual GPUs); jobs are submitted
in a burst (each notebook sleeps, then appends its job id to a file in its last cell) and the server is
killed -9 at that point: seconds after the burst began, or the moment a job first finishes (its last
cell ran, the runner is writing its output and exit record). Then a restart on the same data dir, a
wait until every job has ended, and the counts, one row per kill point:

  acknowledged  submissions answered 201 before the kill
  present       acknowledged jobs the restarted server lists, each once
  run twice     jobs whose last cell ran more than once
  lost          acknowledged jobs the server does not list
  not ended     jobs not SUCCEEDED / FAILED / CANCELLED when the wait ran out
  failed        jobs that ended other than SUCCEEDED
  orphans       job processes alive after the server stopped

    python benchmarks/crash_bench.py                      # 6 kill points, 8 jobs each
    python benchmarks/crash_bench.py --points 0.2,1,first --jobs 12 --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

try:  # the installed package, or whichever copy PYTHONPATH names
    import jupyter_gpusched  # noqa: F401
except ImportError:  # pragma: no cover - run from a bare checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jupyter_gpusched.testing.crash import FIRST_FINISH, CrashCounts, CrashRun  # noqa: E402

DEFAULT_POINTS = "0.3,0.5,1.5,3,first,first"
COLUMNS = [
    ("kill point", "kill_point"),
    ("acknowledged", "acknowledged"),
    ("present", "present"),
    ("run twice", "run_twice"),
    ("lost", "lost"),
    ("duplicated", "duplicates"),
    ("not ended", "not_terminal"),
    ("failed", "failed"),
    ("orphans", "orphans"),
]


def parse_points(text: str) -> list[float | str]:
    return [FIRST_FINISH if p.strip() == "first" else float(p) for p in text.split(",") if p.strip()]


def table(rows: list[CrashCounts]) -> str:
    head = [name for name, _ in COLUMNS]
    body = [[str(getattr(r, attr)) for _, attr in COLUMNS] for r in rows]
    totals = ["total"] + [str(sum(getattr(r, attr) for r in rows)) for _, attr in COLUMNS[1:]]
    widths = [max(len(x) for x in col) for col in zip(head, *body, totals, strict=True)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, body), line(totals)])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", default=DEFAULT_POINTS, help="seconds after the burst began, or 'first'")
    p.add_argument("--jobs", type=int, default=8, help="jobs submitted per kill point")
    p.add_argument("--seconds", type=float, default=1.0, help="how long each notebook sleeps")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)

    rows = []
    started = time.monotonic()
    for point in parse_points(args.points):
        label = point if isinstance(point, str) else f"{point:g} s into the burst"
        with tempfile.TemporaryDirectory(prefix="gpusched-crash-") as tmp:
            run = CrashRun(Path(tmp), gpus=4, per_round=args.jobs, seconds=args.seconds)
            run.round(point)
            rows.append(run.settle(str(label)))
        print(f"  {label}: {rows[-1].states}", file=sys.stderr, flush=True)
    print(table(rows))
    print(f"\n{len(rows)} kill points in {time.monotonic() - started:.0f} s")
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    bad = sum(r.lost + r.run_twice + r.duplicates + r.not_terminal + r.orphans for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
