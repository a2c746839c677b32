"""Results without a shared volume: each job's pod uploads its executed notebook and output folder to the
service with a job-scoped token (docs/kubernetes.md, *Results without a shared volume*).

- **The token** is 32 random bytes, made when the job is first launched. The service keeps only its SHA-256
  (in memory, and as the Job's annotation `gpusched.io/upload-token-sha256`, so a service adopting the job after
  a restart still knows it); the pod gets the token itself from a Secret owned by the Job (env
  GPUSCHED_UPLOAD_TOKEN). It is valid for that job only, for uploads only, and only while the job runs: once the
  service has heard the job ended, it is refused. It is never written to a log or an API response.
- **The pod** runs `pod_upload.py` (shipped in the job's ConfigMap), which starts the notebook command and
  PUTs the notebook as cells finish and at the end, then the output folder (capped at `max_upload_bytes`).
- **The service** takes `PUT /gpusched/api/internal/jobs/{id}/upload/notebook|files/<path>` authenticated only by
  that token (server/handlers/upload.py) and writes into the job's folder (service/results_upload.py).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from pathlib import Path
from typing import Any

from .config import KubernetesConfig
from .manifests import wrap_notebook_command

A_TOKEN_HASH = "gpusched.io/upload-token-sha256"
UPLOAD_SCRIPT = "gpusched_upload.py"
TOKEN_KEY = "upload-token"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_matches(token: str, stored_hash: str | None) -> bool:
    return bool(stored_hash) and hmac.compare_digest(token_hash(token), str(stored_hash))


def upload_base(cfg: KubernetesConfig, job_id: str) -> str:
    return f"{cfg.upload_url.rstrip('/')}/gpusched/api/internal/jobs/{job_id}/upload"


def add_upload(job: dict[str, Any], cm: dict[str, Any], job_id: str, token: str, cfg: KubernetesConfig) -> dict:
    """Make the Job's pod upload its results (in place); returns the Secret holding the token."""
    meta = job["metadata"]
    meta["annotations"][A_TOKEN_HASH] = token_hash(token)
    secret_name = f"{meta['name']}-upload"[:253]
    cm["data"][UPLOAD_SCRIPT] = (Path(__file__).parent / "pod_upload.py").read_text(encoding="utf-8")
    container = job["spec"]["template"]["spec"]["containers"][0]
    wrap_notebook_command(container, "python", f"/gpusched/input/{UPLOAD_SCRIPT}")
    container["env"] = [
        *container.get("env", []),
        {"name": "GPUSCHED_UPLOAD_URL", "value": upload_base(cfg, job_id)},
        {"name": "GPUSCHED_UPLOAD_INTERVAL", "value": str(cfg.upload_interval)},
        {"name": "GPUSCHED_UPLOAD_MAX_BYTES", "value": str(cfg.max_upload_bytes)},
        {"name": "GPUSCHED_UPLOAD_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret_name, "key": TOKEN_KEY}}},
    ]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name,
            "namespace": meta["namespace"],
            "labels": dict(meta["labels"]),
            "annotations": {"gpusched.io/job-id": job_id},
        },
        "type": "Opaque",
        "stringData": {TOKEN_KEY: token},
    }
