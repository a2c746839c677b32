"""GPU-seconds lost per preemption, with and without the checkpoint helper, on the live local backend.

Each run: the live service (store + core + LocalBackend, 2 virtual GPUs, real runner and kernel processes) runs a
small training notebook (jupyter_gpusched.testing.training: `steps` steps of `step_s` seconds on 2 GPUs) as a
tenant that borrows both GPUs; once it has run `--preempt-at` steps a high-priority job of the GPUs' owner takes
them back (a real preemption: SIGTERM to the kernel, the grace period, the kill), and the training job finishes on
its second attempt. Lost work = (the last step attempt 1 reached - the step attempt 2 starts at) x step_s x GPUs.

  none      the notebook never saves: attempt 2 starts from step 0
  periodic  checkpoint.save every --save-every seconds, no on_preempt: loses the steps since the last save
  helper    periodic saves + checkpoint.on_preempt(lambda: state): the SIGTERM saves the step it is at

    python benchmarks/checkpoint_loss.py                    # 2 preemptions per mode
    python benchmarks/checkpoint_loss.py --runs 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from jupyter_gpusched.testing.training import train_then_preempt

GPUS = 2
MODES = {
    "none": {"save_every": 1e9, "use_helper": False},
    "periodic": {"use_helper": False},
    "helper": {"use_helper": True},
}


def lost_steps(trace: list[tuple[str, int, int]]) -> int:
    reached = max([s for e, a, s in trace if a == 1 and e in ("step", "start", "preempted")], default=0)
    resumed = next(s for e, a, s in trace if e == "start" and a == 2)
    return reached - resumed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2, help="preemptions per mode")
    ap.add_argument("--steps", type=int, default=240)
    ap.add_argument("--step-s", type=float, default=0.05, help="seconds per training step")
    ap.add_argument("--save-every", type=float, default=4.0, help="seconds between periodic saves")
    ap.add_argument("--preempt-at", type=int, default=130, help="preempt once this many steps ran")
    ap.add_argument("--grace", type=float, default=30.0, help="LocalBackend.preempt_grace")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args(argv)

    rows = []
    print(f"{'mode':<9} {'run':>3} {'reached':>8} {'resumed':>8} {'lost GPU-s':>10}")
    for mode, params in MODES.items():
        for run in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="gpusched-ckpt-bench-") as tmp:
                trace, _ = train_then_preempt(
                    Path(tmp),
                    args.grace,
                    ready=lambda t: any(e == "step" and s >= args.preempt_at for e, _, s in t),
                    **{"steps": args.steps, "step_s": args.step_s, "save_every": args.save_every, **params},
                )
            lost = lost_steps(trace)
            resumed = next(s for e, a, s in trace if e == "start" and a == 2)
            row = {"mode": mode, "run": run, "reached": resumed + lost, "resumed": resumed}
            row["lost_gpu_s"] = lost * args.step_s * GPUS
            rows.append(row)
            print(f"{mode:<9} {run:>3} {row['reached']:>8} {resumed:>8} {row['lost_gpu_s']:>10.2f}", flush=True)
    print()
    for mode in MODES:
        lost = [r["lost_gpu_s"] for r in rows if r["mode"] == mode]
        print(f"{mode:<9} lost GPU-seconds per preemption: mean {statistics.mean(lost):.2f} over {len(lost)}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
