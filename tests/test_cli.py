"""The command line's parsing and what it sends: plain unit tests (no server; the client is replaced)."""

from __future__ import annotations

import io
import json

import pytest

import jupyter_gpusched.cli as cli
from jupyter_gpusched.cli import main
from jupyter_gpusched.cli.commands import forecast_summary, output_name
from jupyter_gpusched.cli.options import spec_from_args
from jupyter_gpusched.client import GPUSchedError


class RecordingClient:
    """Stands in for Client: records what `submit` was asked to send."""

    submitted: list[tuple[str, dict]] = []

    def __init__(self, url=None, token=None):
        pass

    def submit(self, notebook, **fields):
        RecordingClient.submitted.append((notebook, fields))
        return {"id": "j1", "state": "QUEUED", "position": 0, "notebook": notebook, **fields}


@pytest.fixture
def recording(monkeypatch):
    RecordingClient.submitted = []
    monkeypatch.setattr(cli, "Client", RecordingClient)
    return RecordingClient.submitted


def submit_args(*argv: str):
    return cli.build_parser().parse_args(["submit", "nb.ipynb", *argv])


def test_parameters_are_python_literals_like_the_lab_forms(recording):
    args = submit_args("-p", "lr=1e-3", "-p", "x=None", "-p", "day=2024-01-01", "-p", "sizes=[1,2]", "-p", "name=adam")
    out = io.StringIO()
    assert cli.run(args, out) == 0
    notebook, fields = recording[0]
    assert notebook == "nb.ipynb"
    assert fields["parameters"] == {"lr": 0.001, "x": None, "day": "2024-01-01", "sizes": [1, 2], "name": "adam"}
    json.dumps(fields)  # everything is sendable (a YAML date was not)
    assert out.getvalue() == "submitted j1: QUEUED, position 1 in line\n"


def test_every_api_field_has_an_option_and_only_given_ones_are_sent(recording):
    args = submit_args(
        "--gpus", "2", "--priority", "high", "--tenant", "vision", "-p", "epochs=3", "--max-runtime", "600",
        "--preemptible", "--max-retries", "0", "--gpu-type", "A100",
    )  # fmt: skip
    assert spec_from_args(args) == {
        "gpus": 2,
        "priority": "high",
        "tenant": "vision",
        "parameters": {"epochs": 3},
        "max_runtime": 600.0,
        "preemptible": True,
        "max_retries": 0,
        "gpu_type": "A100",
    }
    assert spec_from_args(submit_args()) == {}  # the server's defaults apply


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "x-y=1"], "argument -p/--param: parameter name 'x-y' is not a valid Python identifier"),
        (["-p", "lambda=1"], "argument -p/--param: parameter name 'lambda' is a Python keyword"),
        (["-p", "novalue"], "argument -p/--param: parameter 'novalue' must look like name=value"),
        (["--priority", "urgent"], "argument --priority: invalid choice: 'urgent'"),
        (["--max-retries", "many"], "argument --max-retries: invalid int value: 'many'"),
    ],
)
def test_a_bad_option_is_one_line_and_exit_code_2(argv, message, capsys, recording):
    with pytest.raises(SystemExit) as exited:
        main(["submit", "nb.ipynb", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"jupyter gpusched submit: error: {message}"), err
    assert err.rstrip().endswith("(see jupyter gpusched submit --help)")
    assert recording == []


def test_a_self_parsing_command_after_server_options_says_so_instead_of_doing_nothing():
    with pytest.raises(GPUSchedError, match="manifest parses its own arguments"):
        cli.run(cli.build_parser().parse_args(["--url", "http://127.0.0.1:9/", "manifest"]))


def test_the_forecast_prints_a_summary_not_its_json():
    step = 600
    f = {
        "values": [2.0] * 6 + [5.0] + [1.0] * 137,
        "lower": [1.0] * 144,
        "upper": [3.0] * 6 + [7.5] + [2.0] * 137,
        "times": [f"2026-12-03T{h:02d}:{m:02d}:00+00:00" for h in range(24) for m in range(0, 60, 10)],
        "model": "prophet-ar",
        "series": "requested",
        "tenant": None,
        "step_s": step,
        "note": "chosen by backtest",
        "skill": {"models": {"prophet-ar": {"mase": 0.41}, "last-value": {"mase": 0.48}, "mean": {"mase": None}}},
    }
    text = forecast_summary(f)
    assert text.splitlines() == [
        "Forecast of GPUs requested, all tenants (prophet-ar, 144 steps of 10 min):",
        "  next hour  2.0 GPUs (band 1.0 to 3.0)",
        "  next 24 h  peak 5.0 GPUs at 2026-12-03 01:00 (band up to 7.5)",
        "  backtest MASE (lower is better): prophet-ar 0.41 · last-value 0.48",
        "  chosen by backtest",
        "  (--json prints every value)",
    ]
    assert "no history yet" in forecast_summary({"values": [], "tenant": "vision", "note": ""})


def test_an_output_is_named_after_its_notebook_and_job():
    assert output_name({"id": "3f2a9c1b7e4d", "notebook": "runs/train.ipynb"}) == "train.3f2a9c1b7e4d.ipynb"
    assert output_name({"id": "ab", "notebook": "x"}) == "x.ab.ipynb"
