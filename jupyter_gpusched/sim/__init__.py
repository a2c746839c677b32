"""Trace-driven simulator: replays real GPU-cluster traces through the core scheduler on a
virtual clock (engine.py), with trace loaders (traces.py), scenario files (scenario.py),
metrics and bounds (metrics.py) and the side-by-side benchmark (report.py)."""

from .engine import CheckpointModel, JobRecord, Lifetime, PoolConfig, SimJob, SimResult, Simulation, simulate
from .traces import Trace, TraceError, TraceJob, load_trace

__all__ = [
    "CheckpointModel",
    "JobRecord",
    "Lifetime",
    "PoolConfig",
    "SimJob",
    "SimResult",
    "Simulation",
    "Trace",
    "TraceError",
    "TraceJob",
    "load_trace",
    "simulate",
]
