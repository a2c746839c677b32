"""`jupyter gpusched schedule ...` and `%gpusched schedule ...` against a real server (live_server)."""

from __future__ import annotations

import io

import nbformat
import pytest
from nbclient import NotebookClient

import jupyter_gpusched.cli as cli
from jupyter_gpusched.client import Client
from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(240)


def run_cli(server, *argv: str) -> str:
    out = io.StringIO()
    args = cli.build_parser().parse_args(["--url", server.url, "--token", server.token, *argv])
    assert cli.run(args, out) == 0
    return out.getvalue()


def test_schedule_commands(live_server, monkeypatch):
    make_notebook(live_server.root / "nightly.ipynb", "1 + 1", parameters="lr = 0.1")
    monkeypatch.chdir(live_server.root)
    added = run_cli(live_server, "schedule", "add", "nightly.ipynb", "--cron", "0 2 * * *", "--tz", "Europe/Berlin",
                    "--gpus", "2", "-p", "lr=0.01", "--overlap", "queue")  # fmt: skip
    sid = added.split()[1].rstrip(":")
    assert added.startswith(f"schedule {sid}: 0 2 * * * (Europe/Berlin), next run ")
    s = Client(live_server.url, live_server.token).schedule(sid)
    assert s["job"]["gpus"] == 2 and s["job"]["parameters"] == {"lr": 0.01} and s["overlap"] == "queue"
    listing = run_cli(live_server, "schedule", "list")
    assert "CRON" in listing and sid in listing and "nightly.ipynb" in listing
    assert run_cli(live_server, "schedule", "pause", sid) == f"schedule {sid} paused\n"
    assert f"{sid}  0 2 * * *  Europe/Berlin  paused" in run_cli(live_server, "schedule", "list")
    assert run_cli(live_server, "schedule", "resume", sid).startswith(f"schedule {sid} resumed, next run ")
    assert run_cli(live_server, "schedule", "jobs", sid) == "no runs yet\n"
    assert run_cli(live_server, "schedule", "rm", sid) == f"schedule {sid} deleted (its runs stay)\n"
    assert sid not in run_cli(live_server, "schedule", "list")
    with pytest.raises(SystemExit):  # --cron is required: a one-line usage error
        cli.build_parser().parse_args(["schedule", "add", "nightly.ipynb"])


def test_schedule_magic_in_a_real_kernel(live_server, monkeypatch):
    root = live_server.root
    make_notebook(root / "hourly.ipynb", "1 + 1")
    nb = nbformat.v4.new_notebook()
    sources = [
        "%load_ext jupyter_gpusched",
        "%gpusched schedule add hourly.ipynb --cron '0 * * * *' --tz UTC --priority low",
        "%gpusched schedule list",
        "%gpusched schedule add hourly.ipynb --cron 'every hour'",
    ]
    nb.cells = [nbformat.v4.new_code_cell(src) for src in sources]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(live_server.runtime))
    monkeypatch.delenv("GPUSCHED_URL", raising=False)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(root)}}).execute()
    out = ["".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells]
    assert out[1].startswith("schedule ") and "0 * * * * (UTC), next run " in out[1], out[1]
    sid = out[1].split()[1].rstrip(":")
    assert sid in out[2] and "hourly.ipynb" in out[2]
    assert out[3].strip().startswith("gpusched: 'every hour' is not a valid cron expression"), out[3]
    assert Client(live_server.url, live_server.token).schedule(sid)["job"]["priority"] == "low"
