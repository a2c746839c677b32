"""Admission that belongs to another system (Kueue): the core keeps the books, never decides.

Under `c.KubernetesBackend.admission = "kueue"` Kueue admits jobs against its own ClusterQueues and the
kube-scheduler binds their pods. The core still holds every job's state, history, cost and the GPUs it
uses, so every view works as usual, but its pass admits and preempts nothing: the driver reports each
admission it observed with `Scheduler.admit_observed`. Not in the policy registry, so a sweep or a
config can never pick it by name.
"""

from __future__ import annotations

from .base import Policy


class ExternalAdmission(Policy):
    """The pass does nothing: jobs wait in the queue until the driver reports where they were admitted."""

    name = "external"

    def schedule(self, s, now):
        return None
