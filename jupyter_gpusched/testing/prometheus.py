"""A real Prometheus server (Debian's `prometheus`; scripts/ci-prometheus-deps.sh installs it) whose TSDB
is backfilled from OpenMetrics text with `promtool tsdb create-blocks-from openmetrics`."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from .net import free_port


def gauge_lines(name: str, help_: str, samples: list[tuple[str, float, float]]) -> list[str]:
    """One gauge family in OpenMetrics text: samples are (labels without braces, value, epoch seconds)."""
    return [
        f"# HELP {name} {help_}",
        f"# TYPE {name} gauge",
        *(f"{name}{{{lab}}} {v} {int(t) if float(t).is_integer() else t}" for lab, v, t in samples),
    ]


@contextmanager
def backfilled_prometheus(base: Path, openmetrics: str) -> Iterator[str]:
    """Start Prometheus on a free port over `openmetrics` (ending in '# EOF'); yield its URL.
    Skips the test where prometheus or promtool is not installed."""
    missing = [tool for tool in ("prometheus", "promtool") if shutil.which(tool) is None]
    if missing:
        pytest.skip(
            f"{' and '.join(missing)} not installed: run scripts/ci-prometheus-deps.sh (Debian package prometheus)"
        )
    base.mkdir(parents=True, exist_ok=True)
    (base / "samples.om").write_text(openmetrics)
    backfill = [
        "promtool",
        "tsdb",
        "create-blocks-from",
        "openmetrics",
        "--max-block-duration=24h",
        "samples.om",
        "data",
    ]
    done = subprocess.run(backfill, cwd=base, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"promtool failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    (base / "prometheus.yml").write_text("global:\n  scrape_interval: 1h\n")  # scrapes nothing: the backfill is all
    port = free_port()
    log = base / "prometheus.log"
    command = [
        "prometheus",
        f"--config.file={base / 'prometheus.yml'}",
        f"--storage.tsdb.path={base / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--storage.tsdb.retention.time=30d",
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if requests.get(f"{url}/-/ready", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"Prometheus did not come up:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
