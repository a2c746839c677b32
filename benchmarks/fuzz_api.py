"""Schema fuzzing counts: schemathesis over every operation of server/openapi.yaml against a real
`jupyter server` with the extension (fixed seed). Prints requests, 2xx, 4xx, 5xx and any check
that failed (a 5xx, a status / content type / header / body off the spec, schema-breaking input
accepted).

    python benchmarks/fuzz_api.py [--examples 100] [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from jupyter_gpusched.testing.fuzz import SEED, fuzz_api
from jupyter_gpusched.testing.jupyter import new_live_server
from jupyter_gpusched.testing.notebooks import make_notebook


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="examples per operation and mode")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = new_live_server(Path(tmp), "--GPUSched.local_gpus=2")
        make_notebook(server.root / "nb.ipynb", "x = lr")
        server.start()
        try:
            started = time.monotonic()
            report = fuzz_api(server.url, server.token, max_examples=args.examples, seed=args.seed)
            took = time.monotonic() - started
        finally:
            server.stop()
    print(f"{report.summary()} in {took:.1f} s (seed {args.seed}, {args.examples} examples per operation and mode)")
    print("statuses:", ", ".join(f"{code}: {n}" for code, n in sorted(report.statuses.items())))
    for failure in report.failures:
        print("FAILED", failure)
    return 1 if report.failures or report.count(500) else 0


if __name__ == "__main__":
    sys.exit(main())
