"""Results uploaded by a job's own pod (the Kubernetes backend without a shared volume: backends/kubernetes/upload.py).

Only the job's upload token admits an upload, only while the job runs, and only into that job's folder: the
executed notebook (output.ipynb, what GET .../output serves) or a file of its output folder (outputs/<path>,
all of them together under the backend's `max_upload_bytes`). Every refusal of the token looks the same (no
hint whether the job exists).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from ..backends.base import output_path
from .errors import JobNotFound
from .loop import Service

OUTPUTS = "outputs"


class UploadRefused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.upload")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # readers never see half a notebook


def _folder_bytes(folder: Path, leaving_out: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p != leaving_out)


def store_upload(service: Service, job_id: str, token: str, what: str, data: bytes) -> Path:
    """Check the token and write the upload into the job's folder; returns where it went."""
    allowed = getattr(service.backend, "upload_allowed", None)
    try:
        job_dir = service.job_dir(job_id)
    except JobNotFound:
        job_dir = None
    if job_dir is None or allowed is None or not token or not allowed(job_id, token):
        raise UploadRefused(403, "not a valid upload token for a running job")
    if what == "notebook":
        dest = output_path(job_dir)
        _write(dest, data)
        return dest
    rel = PurePosixPath(what.removeprefix("files/")) if what.startswith("files/") else None
    if rel is None or not rel.parts or rel.is_absolute() or any(p in ("", ".", "..") for p in rel.parts):
        raise UploadRefused(400, "upload to notebook or files/<relative path>")
    folder = job_dir / OUTPUTS
    dest = folder.joinpath(*rel.parts)
    cap = int(getattr(service.backend, "max_upload_bytes", 1 << 30))
    if _folder_bytes(folder, dest) + len(data) > cap:
        raise UploadRefused(413, f"the job's uploaded files would pass max_upload_bytes ({cap} bytes)")
    _write(dest, data)
    return dest
