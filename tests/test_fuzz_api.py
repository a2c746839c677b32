"""Schema fuzzing against a live server (issue 11): schemathesis generates requests for every
operation of server/openapi.yaml, valid and schema-breaking, with a fixed seed and a bounded
number of examples. No answer may be a 5xx or differ from the spec, and schema-breaking input
must get a 4xx. The counts are printed (pytest -s shows them; benchmarks/fuzz_api.py too)."""

from __future__ import annotations

import pytest
import yaml

from jupyter_gpusched.testing.fuzz import SPEC_PATH, fuzz_api
from jupyter_gpusched.testing.jupyter import new_live_server
from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(300)

EXAMPLES = 40  # per operation and mode: ~700 requests, well under a minute here


def spec_operations() -> int:
    """How many operations (path and method) server/openapi.yaml describes: every one is fuzzed."""
    spec = yaml.safe_load(SPEC_PATH.read_text())
    methods = {"get", "put", "post", "patch", "delete"}
    return sum(1 for ops in spec["paths"].values() for method in ops if method in methods)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    live = new_live_server(tmp_path_factory.mktemp("fuzz"), "--GPUSched.local_gpus=2")
    make_notebook(live.root / "nb.ipynb", "x = lr")  # the spec's submit example, so some submits succeed
    live.start()
    yield live
    live.stop()


def test_schemathesis_finds_no_5xx_and_no_answer_off_the_spec(server):
    report = fuzz_api(server.url, server.token, max_examples=EXAMPLES)
    print("\n" + report.summary())
    operations = spec_operations()
    assert operations >= 16  # the spec has not lost its paths
    assert report.operations == operations and report.requests > operations * EXAMPLES // 2, report.summary()
    assert report.count(200) > 0 and report.count(400) > 0, report.summary()
    assert report.count(500) == 0, "\n".join(report.failures)
    assert report.failures == [], "\n".join(report.failures)
    assert "Traceback" not in server.log_tail(200_000)
