"""server/openapi.yaml is a valid spec, covers every handler, and the handlers' real
responses match the schemas it promises."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from openapi_spec_validator import validate

import jupyter_gpusched.server as server_pkg
from jupyter_gpusched.server.routes import handlers
from jupyter_gpusched.testing.notebooks import make_notebook
from jupyter_gpusched.testing.waits import wait_for_state

SPEC = yaml.safe_load((Path(server_pkg.__file__).parent / "openapi.yaml").read_text())


def test_spec_is_valid_openapi():
    validate(SPEC)


def test_every_route_is_documented_and_every_documented_path_is_routed():
    routed = set()
    for pattern, _ in handlers("/"):
        if pattern.endswith("(/.*)?"):
            continue  # the JSON 404 for unknown API paths
        routed.add(re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", pattern))
    assert routed == set(SPEC["paths"])


def test_the_forecast_model_parameter_names_every_model():
    from jupyter_gpusched.core.forecast import MODELS

    params = SPEC["paths"]["/gpusched/api/forecast"]["get"]["parameters"]
    (model,) = [p for p in params if p["name"] == "model"]
    assert model["schema"]["enum"] == ["auto", "ensemble", *MODELS]


def _inline(node):
    """OpenAPI 3.0 schema -> JSON Schema: resolve $ref, turn `nullable` into a null type."""
    if isinstance(node, list):
        return [_inline(n) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = SPEC
        for part in node["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return _inline(target)
    out = {k: _inline(v) for k, v in node.items() if k not in ("nullable", "example")}
    if node.get("nullable"):
        return {"anyOf": [out, {"type": "null"}]}
    return out


def response_schema(path: str, method: str, status: int):
    op = SPEC["paths"][path][method.lower()]
    resp = op["responses"][str(status)]
    if "$ref" in resp:
        resp = _inline(resp)
    content = resp["content"]
    media = "application/json" if "application/json" in content else next(iter(content))
    return _inline(content[media]["schema"])


def check(path: str, method: str, status: int, body) -> None:
    jsonschema.validate(body, response_schema(path, method, status))


async def test_responses_match_the_spec(api, jp_root_dir):
    make_notebook(jp_root_dir / "nb.ipynb", "x = 1")
    code, job = await api("POST", "jobs", {"notebook": "nb.ipynb", "parameters": {"a": 1}})
    check("/gpusched/api/jobs", "POST", code, job)
    code, listing = await api("GET", "jobs")
    check("/gpusched/api/jobs", "GET", code, listing)
    code, one = await api("GET", f"jobs/{job['id']}")
    check("/gpusched/api/jobs/{job_id}", "GET", code, one)
    await wait_for_state(api, job["id"], {"SUCCEEDED", "FAILED"})
    code, events = await api("GET", f"jobs/{job['id']}/events")
    check("/gpusched/api/jobs/{job_id}/events", "GET", code, events)
    code, out = await api("GET", f"jobs/{job['id']}/output")
    check("/gpusched/api/jobs/{job_id}/output", "GET", code, out)
    code, q = await api("GET", "queues")
    check("/gpusched/api/queues", "GET", code, q)
    code, c = await api("GET", "cluster")
    check("/gpusched/api/cluster", "GET", code, c)
    code, u = await api("GET", "usage", minutes="60")
    check("/gpusched/api/usage", "GET", code, u)
    assert u["tenants"]["default"]["allocated"]  # the service recorded this minute
    code, me = await api("GET", "me")
    check("/gpusched/api/me", "GET", code, me)
    assert me["admin"] is True and me["default_tenant"] in me["tenants"]  # the server's owner
    code, err = await api("GET", "usage", minutes="0")
    check("/gpusched/api/usage", "GET", code, err)
    code, err = await api("DELETE", f"jobs/{job['id']}")
    check("/gpusched/api/jobs/{job_id}", "DELETE", code, err)
    code, err = await api("POST", "jobs", {"notebook": "nb.ipynb", "gpus": 0})
    check("/gpusched/api/jobs", "POST", code, err)
    code, err = await api("GET", "jobs/nope")
    check("/gpusched/api/jobs/{job_id}", "GET", code, err)


def test_the_schema_check_can_fail():
    with pytest.raises(jsonschema.ValidationError):
        check("/gpusched/api/jobs", "GET", 200, {"jobs": [{"id": 1}]})
