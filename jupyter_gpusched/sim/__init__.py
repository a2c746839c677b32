"""Trace-driven simulator: replays real GPU-cluster traces through the core scheduler on a
virtual clock (engine.py: the event loop), configured by config.py (pools, spot lifetimes,
checkpoints), billing and job progress in accounting.py, results in results.py, with trace
loaders (traces.py), scenario files (scenario.py), metrics and bounds (metrics.py) and the
side-by-side benchmark (report.py)."""

from .config import CheckpointModel, Lifetime, PoolConfig, SimJob
from .engine import Simulation, simulate
from .results import JobRecord, SimResult
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
