"""The live service (store + core + backend) in a test's folder, and ticking it until something holds."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..backends.base import Backend
from ..backends.local import LocalBackend
from ..core.health import HealthConfig
from ..service import Service, ServiceConfig
from .waits import wait_until


def service_in(folder: Path, backend: Backend, clock: Callable[[], float] = time.time, **config: Any) -> Service:
    """A live service whose notebooks live in folder/root and whose SQLite store and job folders live in
    folder/data; `config`: any other ServiceConfig field (or another `db_url`); `clock`: a virtual one."""
    root = folder / "root"
    root.mkdir(parents=True, exist_ok=True)
    data = folder / "data"
    config.setdefault("db_url", f"sqlite:///{data / 'db.sqlite'}")
    return Service(ServiceConfig(data_dir=data, root_dir=root, **config), backend, clock)


def make_service(folder: Path, backend: Backend | None = None, **health: Any) -> Service:
    """`service_in` on the local backend (2 virtual GPUs, a heartbeat every 0.5 s) unless `backend` is given;
    `health`: HealthConfig fields. No GPU-memory checks (there are no GPUs)."""
    backend = backend or LocalBackend(virtual_gpus=2, heartbeat_interval=0.5)
    return service_in(folder, backend, health=HealthConfig(**health), memory_check_interval=0.0)


def run_until(
    service: Service,
    predicate: Callable[[], Any],
    timeout: float = 60.0,
    what: str = "",
    *,
    interval: float = 0.1,
    after_tick: Callable[[], Any] | None = None,
) -> float:
    """Tick the service until `predicate()` holds, running `after_tick()` (invariants to check) after each
    tick. Returns the longest tick, in seconds."""
    longest = 0.0

    def tick(pause: float) -> None:
        nonlocal longest
        started = time.monotonic()
        service.tick()
        longest = max(longest, time.monotonic() - started)
        if after_tick is not None:
            after_tick()
        time.sleep(pause)

    def describe() -> str:
        states = Counter(j.state.value for j in service.scheduler.jobs.values())
        return f"{what or predicate}: {dict(states)}"

    wait_until(predicate, timeout, describe, interval, step=tick)
    return longest
