"""Names, labels and annotations: how a job's Job, ConfigMap and pods are named and found again.

A job's Job and ConfigMap are both called `job_name(job_id)`: `gpusched-<id>`, lower-cased and cut to a valid
RFC 1123 label, with a hash of the id appended whenever the id had to be changed, so odd ids (and odd notebook
names, which only appear in labels after sanitising) never clash. The exact id, notebook path, owner and
tenant are annotations; labels carry sanitised copies for selectors.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "jupyter-gpusched"
L_INSTANCE = "gpusched.io/instance"
L_JOB_ID = "gpusched.io/job-id"
L_TENANT = "gpusched.io/tenant"
L_PRIORITY = "gpusched.io/priority"
L_NOTEBOOK = "gpusched.io/notebook"
A_JOB_ID = "gpusched.io/job-id"
A_NOTEBOOK = "gpusched.io/notebook"
A_OWNER = "gpusched.io/owner"
A_TENANT = "gpusched.io/tenant"
A_ATTEMPT = "gpusched.io/attempt"
A_NODE = "gpusched.io/node"

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def job_name(job_id: str, prefix: str = "gpusched") -> str:
    """The Job (and ConfigMap) name of a job: a valid RFC 1123 label (<= 63 characters) that depends only on
    the job id. An id that had to be changed to fit gets a hash of the original, so two ids never collide."""
    slug = re.sub(r"[^a-z0-9-]+", "-", job_id.lower()).strip("-")
    name = f"{prefix}-{slug}" if slug else prefix
    if slug == job_id and len(name) <= 63:
        return name
    head = name[: 63 - 9].rstrip("-")
    return f"{head}-{digest(job_id)}"


def label_value(text: str) -> str:
    """`text` as a valid label value (<= 63 chars of [A-Za-z0-9_.-], alphanumeric at both ends); changed
    values carry a hash of the original so distinct inputs stay distinct."""
    text = str(text)
    if len(text) <= 63 and _LABEL_VALUE.match(text):
        return text
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-_.")
    head = slug[:54].rstrip("-_.")
    return f"{head}-{digest(text)}" if head else digest(text)


def instance_selector(instance: str) -> str:
    """The label selector of every object one service instance manages."""
    return f"{MANAGED_BY}={MANAGER},{L_INSTANCE}={label_value(instance)}"


def job_id_of(obj: Mapping) -> str | None:
    """The job id a Job, ConfigMap or pod belongs to (the exact annotation, else the label)."""
    meta = obj.get("metadata") or {}
    return (meta.get("annotations") or {}).get(A_JOB_ID) or (meta.get("labels") or {}).get(L_JOB_ID)
