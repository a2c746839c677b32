"""Schema fuzzing: schemathesis sends requests generated from `server/openapi.yaml` to a live
server (valid ones and, per operation, ones that break the schema) and checks every answer:
no 5xx, only documented statuses, content types, headers and bodies, and schema-breaking
input refused with a 4xx. Fixed seed, bounded examples: the same requests every run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
import requests
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import FailureGroup
from schemathesis.core.result import Err
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import jupyter_gpusched.server as server_pkg

SPEC_PATH = Path(server_pkg.__file__).parent / "openapi.yaml"
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
SEED = 20_251_111
# Refusals of schema-breaking input: schemathesis's list, less 5xx (not_a_server_error reports those), plus 413:
# a body or parameters past the server's size limits (documented per operation) is refused as too large
# before its content is read, which is how a negative example with a long enough array or string ends.
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]


@dataclass
class FuzzReport:
    """What the run sent and got back; `failures` is one line per check that failed."""

    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    operations: int = 0

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def count(self, low: int) -> int:
        return sum(n for status, n in self.statuses.items() if low <= status < low + 100)

    def summary(self) -> str:
        return (
            f"schemathesis: {self.operations} operations, {self.requests} requests, {self.count(200)} 2xx, "
            f"{self.count(400)} 4xx, {self.count(500)} 5xx, {len(self.failures)} check failures"
        )


def fuzz_api(
    base_url: str, token: str, *, max_examples: int = 15, seed: int = SEED, spec_path: Path = SPEC_PATH
) -> FuzzReport:
    """Fuzz every operation of the spec against the server at `base_url` (its root URL) as `token`."""
    config = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REJECTIONS}}})
    schema = schemathesis.openapi.from_path(str(spec_path), config=config)
    report = FuzzReport()
    session = requests.Session()
    session.headers["Authorization"] = f"token {token}"
    settings = hypothesis.settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    for result in schema.get_all_operations():
        if isinstance(result, Err):  # the spec itself is broken: tests/test_openapi.py says where
            raise result.err()
        operation = result.ok()
        report.operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzz_operation(operation, mode, base_url, session, report, settings, seed)
            except hypothesis.errors.Unsatisfiable:
                pass  # nothing to negate in this operation
    return report


def _fuzz_operation(operation, mode, base_url, session, report, settings, seed) -> None:
    @settings
    @hypothesis.seed(seed)
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode))
    def send(case) -> None:
        response = case.call(base_url=base_url, session=session, timeout=60)
        report.statuses[response.status_code] += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=dict(session.headers))
        except (FailureGroup, AssertionError) as exc:  # keep going: report them all
            lines = str(exc).strip().splitlines()
            report.failures.append(
                f"{operation.label} [{mode.value}] -> {response.status_code}: {' | '.join(lines[:6])}"[:1500]
            )

    send()
