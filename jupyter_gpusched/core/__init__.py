"""The pure scheduling core: no I/O, no wall clock. See DESIGN.md."""

from .model import (
    Admit,
    Event,
    IllegalTransition,
    Job,
    JobSpec,
    JobState,
    NodeSpec,
    Pool,
    Preempt,
    Priority,
    Scale,
    Tenant,
    transition,
)
from .placement import Cluster
from .policies import make_policy, policy_names
from .scheduler import OVERSIZE_GRANT_AFTER_S, Scheduler, SchedulerConfig, SpecError, UnknownJob

__all__ = [
    "OVERSIZE_GRANT_AFTER_S",
    "Admit",
    "Cluster",
    "Event",
    "IllegalTransition",
    "Job",
    "JobSpec",
    "JobState",
    "NodeSpec",
    "Pool",
    "Preempt",
    "Priority",
    "Scale",
    "Scheduler",
    "SchedulerConfig",
    "SpecError",
    "Tenant",
    "UnknownJob",
    "make_policy",
    "policy_names",
    "transition",
]
