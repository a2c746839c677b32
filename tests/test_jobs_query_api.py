"""`GET jobs?sort=&order=&q=`: the order and text filter the Lab Jobs view pages through."""

from __future__ import annotations

import pytest

from jupyter_gpusched.testing.notebooks import make_notebook

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def gpusched_config():
    return {"tenants": {"default": {"quota": 2}, "team-a": {"quota": 1, "burst": 0}}}


async def test_list_sorts_by_column_and_filters_by_text(api, jp_root_dir):
    for name in ("alpha", "beta", "gamma"):
        make_notebook(jp_root_dir / f"{name}.ipynb", "import time; time.sleep(30)")
    submitted = []  # (notebook, priority, gpus, tenant), in submission order
    for notebook, priority, gpus, tenant in [
        ("beta.ipynb", "low", 2, "default"),
        ("gamma.ipynb", "high", 1, "team-a"),
        ("alpha.ipynb", "normal", 2, "default"),
    ]:
        code, job = await api(
            "POST", "jobs", {"notebook": notebook, "priority": priority, "gpus": gpus, "tenant": tenant}
        )
        assert code == 201, job
        submitted.append(job["id"])

    async def ids(**query):
        code, body = await api("GET", "jobs", **query)
        assert code == 200, body
        return [j["id"] for j in body["jobs"]], body

    newest_first = submitted[::-1]
    assert (await ids())[0] == newest_first
    assert (await ids(sort="created", order="asc"))[0] == submitted
    assert (await ids(sort="notebook", order="asc"))[0] == [submitted[2], submitted[0], submitted[1]]
    assert (await ids(sort="priority", order="desc"))[0] == [submitted[1], submitted[2], submitted[0]]
    # Ties keep newest first in both orders.
    assert (await ids(sort="gpus", order="desc"))[0] == [submitted[2], submitted[0], submitted[1]]
    assert (await ids(sort="gpus", order="asc"))[0] == [submitted[1], submitted[2], submitted[0]]
    # Paging follows the order.
    page, body = await ids(sort="notebook", order="asc", limit="2", offset="1")
    assert page == [submitted[0], submitted[1]] and body["total"] == 3 and body["next_offset"] is None

    page, body = await ids(q="GAMMA")
    assert page == [submitted[1]] and body["total"] == 1
    page, _ = await ids(q=submitted[0][:8])
    assert page == [submitted[0]]
    page, _ = await ids(q="team-a", sort="created", order="asc")
    assert page == [submitted[1]]

    code, err = await api("GET", "jobs", sort="bogus")
    assert code == 400 and err["field"] == "sort"
    code, err = await api("GET", "jobs", order="sideways")
    assert code == 400 and err["field"] == "order"
    for job_id in submitted:
        await api("DELETE", f"jobs/{job_id}")


async def test_list_filters_kernel_reservations_apart(api, service, jp_root_dir):
    """`?interactive=`: the lab's status bar counts jobs without the GPU kernels' reservations."""
    make_notebook(jp_root_dir / "train.ipynb", "import time; time.sleep(30)")
    code, job = await api("POST", "jobs", {"notebook": "train.ipynb"})
    assert code == 201, job
    kernel = service.submit(notebook="kernel:k1", owner=job["owner"], interactive=True)

    async def ids(**query):
        code, body = await api("GET", "jobs", **query)
        assert code == 200, body
        return sorted(j["id"] for j in body["jobs"])

    assert await ids() == sorted([job["id"], kernel.id])
    assert await ids(interactive="true") == [kernel.id]
    assert await ids(interactive="false") == [job["id"]]
    assert await ids(interactive="false", mine="true") == [job["id"]]
    code, err = await api("GET", "jobs", interactive="maybe")
    assert code == 400 and err["field"] == "interactive"
    for job_id in (job["id"], kernel.id):
        await api("DELETE", f"jobs/{job_id}")
