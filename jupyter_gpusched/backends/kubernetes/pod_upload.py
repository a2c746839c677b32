"""Runs inside a job's pod (standard library only: it is shipped in the job's ConfigMap, not installed).

    python /gpusched/input/gpusched_upload.py papermill IN OUT -f PARAMS ...

Starts the notebook command, and while it runs PUTs the executed notebook (OUT) to the service each time it
changed (papermill rewrites it as cells finish), every GPUSCHED_UPLOAD_INTERVAL seconds; at the end the final
notebook and then every file of the output folder (GPUSCHED_UPLOAD_MAX_BYTES in all). The service's URL and the
job's upload token come from GPUSCHED_UPLOAD_URL and GPUSCHED_UPLOAD_TOKEN; the token is sent only in the
X-Gpusched-Upload-Token header. Exits with the command's exit code: an upload that fails is reported on stderr
and never fails the job.
"""

import os
import subprocess
import sys
import urllib.parse
import urllib.request

HEADER = "X-Gpusched-Upload-Token"


def put(base: str, token: str, what: str, path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    req = urllib.request.Request(base.rstrip("/") + "/" + what, data=data, method="PUT")
    req.add_header(HEADER, token)
    req.add_header("Content-Type", "application/octet-stream")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
    except Exception as exc:  # the service may be restarting: the next upload sends it again
        print(f"gpusched upload of {what} failed: {exc}", file=sys.stderr, flush=True)


def main(argv: list) -> int:
    base, token = os.environ.get("GPUSCHED_UPLOAD_URL", ""), os.environ.get("GPUSCHED_UPLOAD_TOKEN", "")
    if os.environ.get("RANK", "0") != "0":
        base = ""  # a multi-node job's results are rank 0's
    interval = float(os.environ.get("GPUSCHED_UPLOAD_INTERVAL", "10"))
    cap = int(os.environ.get("GPUSCHED_UPLOAD_MAX_BYTES", str(1 << 30)))
    out = argv[2] if len(argv) > 2 else ""
    proc = subprocess.Popen(argv)
    sent = None
    while True:
        try:
            code = proc.wait(timeout=interval)
            break
        except subprocess.TimeoutExpired:
            pass
        try:
            stamp = os.stat(out).st_mtime_ns
        except OSError:
            continue
        if stamp != sent and base:
            put(base, token, "notebook", out)
            sent = stamp
    if base and os.path.isfile(out):
        put(base, token, "notebook", out)
    folder = os.path.dirname(out)
    total = 0
    for root, dirs, files in os.walk(folder) if base and folder else ():
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            if path == out or os.path.islink(path):
                continue
            size = os.path.getsize(path)
            if total + size > cap:
                print(f"gpusched upload: {path} left out (over {cap} bytes in all)", file=sys.stderr, flush=True)
                continue
            total += size
            rel = os.path.relpath(path, folder)
            put(base, token, "files/" + urllib.parse.quote(rel), path)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
