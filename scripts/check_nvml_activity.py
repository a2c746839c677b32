"""Check the stall watch's NVML path on a real GPU (run where one is present; prints what it saw).

    CUDA_VISIBLE_DEVICES=0 python scripts/check_nvml_activity.py

Samples GPU utilisation and memory of the visible GPUs with backends/activity.py's GpuSampler while the GPU idles,
then while torch (if installed) runs matrix products on it, and says whether the busy spell would count as progress
under core/stalls.py's default rules.
"""

from __future__ import annotations

import threading
import time

from jupyter_gpusched.backends.activity import GpuSampler
from jupyter_gpusched.core.stalls import Activity, StallRules, progress


def sample(sampler: GpuSampler, seconds: float) -> list[dict]:
    out = []
    end = time.time() + seconds
    while time.time() < end:
        out.append(sampler.sample())
        time.sleep(0.5)
    return out


def main() -> None:
    sampler = GpuSampler()
    idle = sample(sampler, 3)
    print("idle:", idle[-1])
    try:
        import torch
    except ImportError:
        print("torch not installed: no busy spell; NVML figures above are the check")
        return
    stop = threading.Event()

    def burn() -> None:
        a = torch.randn(8192, 8192, device="cuda")
        while not stop.is_set():
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()

    t = threading.Thread(target=burn)
    t.start()
    time.sleep(2)
    busy = sample(sampler, 3)
    stop.set()
    t.join()
    print("busy:", busy[-1])
    mark = Activity(time=0.0, **idle[-1])
    now = Activity(time=3.0, **busy[-1])
    print("progress under the default rules:", repr(progress(mark, now, StallRules())) or "none")
    sampler.close()


if __name__ == "__main__":
    main()
