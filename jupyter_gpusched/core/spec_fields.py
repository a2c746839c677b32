"""The fields of a job submission (the body of `POST gpusched/api/jobs`), defined once.

The client, the CLI and the magic build their options from `SUBMIT_SPEC`, and the server's
request parsing may read the names, defaults and limits from here; tests hold it equal to
`server/openapi.yaml`'s `JobSubmit` schema and to `JobSpec`'s defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .dependencies import WHEN_CHOICES
from .model import Priority

# Most urgent first: the order every menu and error message lists them in.
PRIORITY_CHOICES: tuple[str, ...] = tuple(p.label for p in sorted(Priority, reverse=True))
DEFAULT_PRIORITY = Priority.NORMAL.label
MAX_RETRIES_LIMIT = 10
MAX_RUNTIME_LIMIT = 365 * 24 * 3600  # seconds: one year (a larger one would overflow the API's times)
MAX_TENANT_CHARS = 255  # the job store's column widths
MAX_GPU_TYPE_CHARS = 64
MAX_CPUS = 4096  # a job's cpus ask, per node
MAX_MEMORY_MIB = 64 * 2**20  # a job's memory ask per node: 64 TiB
MAX_DEPENDENCIES = 100  # job ids in one job's `after`


@dataclass(frozen=True)
class SpecField:
    """One field of the submit body: its JSON type (as the Python type it arrives as) and default."""

    name: str
    type: type
    default: Any = None
    help: str = ""
    required: bool = False
    nullable: bool = False  # null is accepted (and means "the default")
    choices: tuple[str, ...] | None = None
    user_option: bool = True  # the CLI and the magic offer it (not `interactive`: a GPU kernel's server sends it)

    @property
    def option(self) -> str:
        """The command-line option for it: `max_runtime` -> `--max-runtime`."""
        return "--" + self.name.replace("_", "-")


SUBMIT_SPEC: tuple[SpecField, ...] = (
    SpecField("notebook", str, help="path of the .ipynb relative to the server root", required=True),
    SpecField("gpus", int, 1, help="GPUs to reserve (default: 1)"),
    SpecField("priority", str, DEFAULT_PRIORITY, help=f"default: {DEFAULT_PRIORITY}", choices=PRIORITY_CHOICES),
    SpecField("tenant", str, None, help="queue/tenant to charge (default: yours)"),
    SpecField("parameters", dict, None, help="papermill parameters (names are Python identifiers)"),
    SpecField("max_runtime", float, None, help="seconds; the job is stopped past it", nullable=True),
    SpecField(
        "checkpoint_interval",
        float,
        None,
        help="seconds between checkpoints ($GPUSCHED_CHECKPOINT_INTERVAL; a spot pool may shorten it)",
        nullable=True,
    ),
    SpecField("preemptible", bool, False, help="may run on spot capacity and be preempted"),
    SpecField(
        "interactive",
        bool,
        False,
        help="a GPU kernel's reservation: notebook is 'kernel:<kernel id>' (docs/interactive.md)",
        user_option=False,
    ),
    SpecField(
        "max_retries",
        int,
        2,
        help=f"times the job may be retried, 0 to {MAX_RETRIES_LIMIT} (default: 2; see docs/scheduling.md)",
    ),
    SpecField("gpu_type", str, None, help="only on GPUs of this type (a pool's gpu_type)", nullable=True),
    SpecField("stall_timeout", float, None, help="seconds without progress before it counts as stalled", nullable=True),
    SpecField("cpus", float, 0.0, help="CPUs to reserve on its node (default: 0, not counted)"),
    SpecField("memory", int, 0, help="MiB of memory to reserve on its node (default: 0, not counted)"),
    SpecField(
        "notify",
        list,
        None,
        help="where word of its end goes: an http(s) webhook URL, mailto:ADDRESS or an apprise URL "
        "(repeatable; default: your settings; docs/notifications.md)",
    ),
    SpecField("after", list, None, help="a job id it waits for: it starts after that job ends (repeatable)"),
    SpecField(
        "when", str, "succeeded", help="run after dependencies succeeded (default) or ended", choices=WHEN_CHOICES
    ),
)
SUBMIT_FIELDS: frozenset[str] = frozenset(f.name for f in SUBMIT_SPEC)
FIELDS_BY_NAME: dict[str, SpecField] = {f.name: f for f in SUBMIT_SPEC}
