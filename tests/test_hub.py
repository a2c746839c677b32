"""JupyterHub mode against a real JupyterHub: DummyAuthenticator, SimpleLocalProcessSpawner,
configurable-http-proxy, the gpusched service registered by `configure_hub`, and real
single-user servers that forward to it.

Users: alice and carol (group `vision`), bob (group `nlp`), admin (a Hub admin), dora (in the
`gpu-admins` group). Tenants vision and nlp have 1 GPU each and may not borrow.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time

import pytest
import requests

from jupyter_gpusched.testing import Unavailable
from jupyter_gpusched.testing.hub import Hub, ServiceClient
from jupyter_gpusched.testing.notebooks import notebook_json
from jupyter_gpusched.testing.postgres import PostgresServer
from jupyter_gpusched.testing.waits import wait_for

pytestmark = pytest.mark.slow

USERS = ["alice", "bob", "carol", "admin", "dora"]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@pytest.fixture(scope="module")
def pg():
    """The service's store is PostgreSQL where the server binaries exist (CI), else SQLite."""
    try:
        server = PostgresServer().start()
    except Unavailable:
        yield None
        return
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hub(tmp_path_factory, pg):
    gpusched = {
        "local_gpus": 2,
        "tick_interval": 0.2,
        "tenants": {"vision": {"quota": 1, "burst": 0}, "nlp": {"quota": 1, "burst": 0}},
        "default_tenant": "nlp",
        "group_tenants": {"vision": "vision", "nlp": "nlp"},
        "admin_groups": ["gpu-admins"],
        "webhook_secret": "hub-test-secret",  # webhook targets are refused without one
        "notify_defaults": {"users": {"carol": [{"webhook": "http://127.0.0.1:9/carol", "events": ["failed"]}]}},
    }
    if pg is not None:
        gpusched["db_url"] = pg.create_database()
    h = Hub(
        tmp_path_factory.mktemp("hub"),
        groups={"vision": ["alice", "carol"], "nlp": ["bob"], "gpu-admins": ["dora"]},
        admins=["admin"],
        gpusched=gpusched,
    )
    try:
        h.start()
    except Unavailable as exc:
        pytest.skip(str(exc))
    for user in USERS:
        home = h.home(user)
        (home / "quick.ipynb").write_text(notebook_json("print('hello from', 'the job')"))
        (home / "sleep.ipynb").write_text(notebook_json("import time; time.sleep(120)"))
    (h.home("bob") / "secret.ipynb").write_text(notebook_json("print('bob only')"))
    yield h
    h.stop()


@pytest.fixture(scope="module")
def tokens(hub):
    return {u: hub.token(u) for u in USERS}


@pytest.fixture(scope="module")
def as_user(hub, tokens):
    """as_user[name]: that user's client for the service, through the Hub's proxy."""
    return {u: ServiceClient(hub.service_url, tokens[u]) for u in USERS}


def submit(client: ServiceClient, notebook: str = "sleep.ipynb", **fields):
    return client.json("POST", "api/jobs", json={"notebook": notebook, **fields})


def wait_state(client: ServiceClient, job_id: str, states: set[str], timeout: float = 90) -> dict:
    def check():
        code, job = client.json("GET", f"api/jobs/{job_id}")
        assert code == 200, job
        return job if job["state"] in states else None

    return wait_for(check, timeout, f"job {job_id} to reach {states}", interval=0.3)


def test_health_needs_no_token_directly_or_through_the_proxy(hub):
    # What the Helm chart's probes call: the service's own port, no credential.
    for base in (hub.service_direct_url, hub.service_url):
        assert ServiceClient(base, None).json("GET", "api/health") == (200, {"status": "ok"})


def test_requests_without_a_valid_token_are_rejected(hub, tokens):
    anonymous = ServiceClient(hub.service_url, None)
    for method, path in [("GET", "api/jobs"), ("GET", "api/cluster"), ("GET", "metrics"), ("POST", "api/jobs")]:
        code, body = anonymous.json(method, path, json={"notebook": "quick.ipynb"} if method == "POST" else None)
        assert code == 403 and set(body) == {"error", "message", "field"}, body
        assert body["error"] == ("forbidden" if method == "POST" else "unauthenticated"), (
            body
        )  # POST: no XSRF token either
    code, body = ServiceClient(hub.service_url, "not-a-token").json("GET", "api/jobs")
    assert code == 403 and body["error"] == "unauthenticated"
    # a real token of a real user, but without access to this service
    narrow = hub.token("alice", scopes=["read:users:name!user=alice"])
    code, body = ServiceClient(hub.service_url, narrow).json("GET", "api/jobs")
    assert code == 403, body


def test_a_user_cannot_see_or_touch_another_users_jobs(as_user, hub):
    alice, bob, admin = as_user["alice"], as_user["bob"], as_user["admin"]
    code, job = submit(alice, "quick.ipynb")
    assert code == 201, job
    assert job["owner"] == "alice" and job["tenant"] == "vision"
    assert job["notebook"] == str((hub.home("alice") / "quick.ipynb").resolve())
    jid = job["id"]
    wait_state(alice, jid, TERMINAL)

    code, listing = bob.json("GET", "api/jobs")
    assert code == 200 and jid not in [j["id"] for j in listing["jobs"]]
    code, listing = bob.json("GET", "api/jobs", params={"tenant": "vision", "mine": "false"})
    assert code == 200 and listing["jobs"] == []
    for method, path in [
        ("GET", f"api/jobs/{jid}"),
        ("GET", f"api/jobs/{jid}/log"),
        ("GET", f"api/jobs/{jid}/output"),
        ("GET", f"api/jobs/{jid}/events"),
        ("DELETE", f"api/jobs/{jid}"),
    ]:
        code, body = bob.json(method, path)
        assert code == 404 and body["error"] == "not_found", (method, path, body)

    # the owner reads their log and output; an admin sees everyone's jobs
    code, log = alice.json("GET", f"api/jobs/{jid}/log")
    assert code == 200 and "hello from the job" in log
    r = alice.call("GET", f"api/jobs/{jid}/output")
    assert r.status_code == 200 and "hello from the job" in r.text
    code, listing = admin.json("GET", "api/jobs")
    assert jid in [j["id"] for j in listing["jobs"]]
    r = admin.call("GET", "api/jobs", headers={"Host": "hub.example.org"})  # the public name, through the proxy
    assert r.status_code == 200, r.text
    code, detail = as_user["dora"].json("GET", f"api/jobs/{jid}")
    assert code == 200 and detail["owner"] == "alice"


def test_a_user_cannot_see_or_touch_another_users_schedules(as_user, hub):
    alice, bob, admin = as_user["alice"], as_user["bob"], as_user["admin"]
    code, sched = alice.json("POST", "api/schedules", json={"notebook": "quick.ipynb", "cron": "0 2 * * *"})
    assert code == 201, sched
    assert sched["owner"] == "alice" and sched["tenant"] == "vision"
    assert sched["notebook"] == str((hub.home("alice") / "quick.ipynb").resolve())
    sid = sched["id"]
    code, listing = bob.json("GET", "api/schedules")
    assert code == 200 and sid not in [s["id"] for s in listing["schedules"]]
    for method, path, body in [
        ("GET", f"api/schedules/{sid}", None),
        ("GET", f"api/schedules/{sid}/jobs", None),
        ("PATCH", f"api/schedules/{sid}", {"paused": True}),
        ("DELETE", f"api/schedules/{sid}", None),
    ]:
        code, err = bob.json(method, path, json=body)
        assert code == 404 and err["error"] == "not_found", (method, path, err)
    code, err = bob.json(
        "POST", "api/schedules", json={"notebook": "quick.ipynb", "cron": "0 2 * * *", "tenant": "vision"}
    )
    assert code == 403 and err["field"] == "tenant"  # as POST jobs: not a tenant of bob's
    code, listing = admin.json("GET", "api/schedules")
    assert sid in [s["id"] for s in listing["schedules"]]
    code, paused = admin.json("PATCH", f"api/schedules/{sid}", json={"paused": True})
    assert code == 200 and paused["paused"]
    assert alice.json("DELETE", f"api/schedules/{sid}")[0] == 200


def test_a_user_cannot_see_or_touch_another_users_pipelines(as_user):
    alice, bob, admin = as_user["alice"], as_user["bob"], as_user["admin"]
    code, pipe = alice.json(
        "POST",
        "api/pipelines",
        json={"steps": [{"notebook": "sleep.ipynb"}, {"notebook": "quick.ipynb"}], "edges": [[0, 1]]},
    )
    assert code == 201, pipe
    pid, first, second = pipe["id"], pipe["steps"][0]["id"], pipe["steps"][1]["id"]
    assert [s["owner"] for s in pipe["steps"]] == ["alice", "alice"] and pipe["steps"][1]["state"] == "WAITING"
    assert alice.json("GET", f"api/pipelines/{pid}")[0] == 200
    code, err = bob.json("GET", f"api/pipelines/{pid}")
    assert code == 404 and err["error"] == "not_found", err
    code, listing = bob.json("GET", "api/jobs", params={"q": pid})
    assert code == 200 and listing["jobs"] == []
    for step in (first, second):
        for method in ("GET", "DELETE"):
            code, err = bob.json(method, f"api/jobs/{step}")
            assert code == 404 and err["error"] == "not_found", (method, step, err)
    # bob cannot hang a job of his on alice's: refused as an unknown id would be, naming `after`
    for after in ([first], [second], ["nosuchjob123"]):
        code, err = bob.json("POST", "api/jobs", json={"notebook": "quick.ipynb", "after": after})
        assert code == 400 and err["field"] == "after" and after[0] in err["message"], err
    code, mine = bob.json("GET", "api/jobs")
    assert all(j["after"] == [] for j in mine["jobs"]), mine  # nothing of bob's waits on alice's
    # a pipeline's steps are checked as jobs are: his own folder, his own tenant
    for step, field, status in [
        ({"notebook": "../alice/quick.ipynb"}, "steps[1].notebook", 400),
        ({"notebook": "quick.ipynb", "tenant": "vision"}, "steps[1].tenant", 403),
    ]:
        code, err = bob.json("POST", "api/pipelines", json={"steps": [{"notebook": "quick.ipynb"}, step]})
        assert code == status and err["field"] == field, err
    # alice's steps are untouched; an admin sees the pipeline
    code, seen = admin.json("GET", f"api/pipelines/{pid}")
    assert code == 200 and [s["id"] for s in seen["steps"]] == [first, second]
    assert alice.json("GET", f"api/jobs/{second}")[1]["state"] == "WAITING"
    # alice may hang her own job on her step; cancelling the step cancels what waits on it
    code, hers = alice.json("POST", "api/jobs", json={"notebook": "quick.ipynb", "after": [first]})
    assert code == 201 and hers["state"] == "WAITING", hers
    assert alice.json("DELETE", f"api/jobs/{first}")[0] == 200
    for jid in (second, hers["id"]):
        done = wait_state(alice, jid, TERMINAL)
        assert done["state"] == "CANCELLED" and first in done["reason"], done


def test_notify_settings_are_per_user(as_user):
    alice, bob, carol = as_user["alice"], as_user["bob"], as_user["carol"]
    none = {"notify": [], "source": "none"}
    carols = {"notify": [{"webhook": "http://127.0.0.1:9/carol", "events": ["failed"]}], "source": "config:user"}
    assert carol.json("GET", "api/settings/notify") == (200, carols)  # the operator's, for carol only
    assert alice.json("GET", "api/settings/notify") == (200, none)
    hook = {"webhook": "http://127.0.0.1:9/alice-only", "events": ["failed"]}
    code, mine = alice.json("PUT", "api/settings/notify", json={"notify": [hook]})
    assert code == 200 and mine == {"notify": [hook], "source": "user"}, mine
    # bob, and carol in alice's own tenant, still get theirs; no query reaches alice's
    assert bob.json("GET", "api/settings/notify") == (200, none)
    assert bob.json("GET", "api/settings/notify", params={"user": "alice"}) == (200, none)
    assert carol.json("GET", "api/settings/notify") == (200, carols)
    # jobs without `notify` take their owner's defaults
    jobs = {}
    for name, client in (("alice", alice), ("bob", bob), ("carol", carol)):
        code, jobs[name] = submit(client, "quick.ipynb")
        assert code == 201, jobs[name]
    assert jobs["alice"]["notify"] == [hook]
    assert jobs["bob"]["notify"] == []
    assert jobs["carol"]["notify"] == carols["notify"]
    # bob's own setting, and his forgetting it, leave alice's as they are
    bobs = {"webhook": "http://127.0.0.1:9/bob", "events": ["failed"]}
    assert bob.json("PUT", "api/settings/notify", json={"notify": [bobs]}) == (
        200,
        {"notify": [bobs], "source": "user"},
    )
    assert bob.json("PUT", "api/settings/notify", json={"notify": None}) == (200, none)
    assert alice.json("GET", "api/settings/notify") == (200, {"notify": [hook], "source": "user"})
    assert alice.json("PUT", "api/settings/notify", json={"notify": None}) == (200, none)
    for name, client in (("alice", alice), ("bob", bob), ("carol", carol)):
        wait_state(client, jobs[name]["id"], TERMINAL)


def test_jobs_are_not_handed_the_services_hub_token(as_user, hub):
    (hub.home("alice") / "env.ipynb").write_text(
        notebook_json("import os; print('hub token:', os.environ.get('JUPYTERHUB_API_TOKEN'))")
    )
    code, job = submit(as_user["alice"], "env.ipynb")
    assert code == 201, job
    assert wait_state(as_user["alice"], job["id"], TERMINAL)["state"] == "SUCCEEDED"
    r = as_user["alice"].call("GET", f"api/jobs/{job['id']}/output")
    assert "hub token: None" in r.text


def test_cancel_is_owner_or_admin_only(as_user):
    alice, bob, admin = as_user["alice"], as_user["bob"], as_user["admin"]
    code, job = submit(alice, "sleep.ipynb")
    assert code == 201
    assert bob.json("DELETE", f"api/jobs/{job['id']}")[0] == 404
    assert alice.json("GET", f"api/jobs/{job['id']}")[1]["state"] not in TERMINAL
    code, cancelled = admin.json("DELETE", f"api/jobs/{job['id']}")
    assert code == 200 and cancelled["state"] == "CANCELLED"
    code, events = alice.json("GET", f"api/jobs/{job['id']}/events")
    assert events["events"][-1]["actor"] == "admin"


def test_admin_endpoints_and_dashboard_are_for_admins(as_user, hub):
    bob = as_user["bob"]
    code, body = bob.json("GET", "metrics")
    assert code == 403 and body["error"] == "forbidden" and set(body) == {"error", "message", "field"}
    assert bob.call("GET", "dashboard").status_code == 403
    for admin in ("admin", "dora"):  # a Hub admin; a member of an admin group
        r = as_user[admin].call("GET", "metrics")
        assert r.status_code == 200 and "gpusched" in r.text, admin
        r = as_user[admin].call("GET", "dashboard")
        assert r.status_code == 200 and "Tenants" in r.text, admin
    # cluster: a user sees capacity but not others' job ids
    code, job = submit(as_user["alice"], "sleep.ipynb")
    wait_state(as_user["alice"], job["id"], {"ADMITTED", "RUNNING"})
    code, cluster = bob.json("GET", "api/cluster")
    assert code == 200 and all(job["id"] not in n["jobs"] for n in cluster["nodes"])
    code, cluster = as_user["admin"].json("GET", "api/cluster")
    assert any(job["id"] in n["jobs"] for n in cluster["nodes"])
    as_user["alice"].json("DELETE", f"api/jobs/{job['id']}")


def test_tenants_come_from_hub_groups(as_user):
    bob = as_user["bob"]
    code, body = submit(bob, "quick.ipynb", tenant="vision")
    assert code == 403 and body["field"] == "tenant" and "nlp" in body["message"]
    code, job = submit(bob, "quick.ipynb")
    assert code == 201 and job["tenant"] == "nlp"
    code, job2 = submit(as_user["admin"], "quick.ipynb", tenant="vision")  # admins may charge any tenant
    assert code == 201 and job2["tenant"] == "vision"
    for j in (job, job2):
        wait_state(as_user["admin"], j["id"], TERMINAL)


def test_notebook_paths_cannot_leave_the_users_folder(as_user, hub):
    alice = as_user["alice"]
    bob_secret = hub.home("bob") / "secret.ipynb"
    os.symlink(bob_secret, hub.home("alice") / "link.ipynb")
    os.symlink(hub.home("bob"), hub.home("alice") / "bobdir")
    for path in ["../bob/secret.ipynb", str(bob_secret), "link.ipynb", "bobdir/secret.ipynb", "~bob/secret.ipynb"]:
        code, body = submit(alice, path)
        assert code == 400 and body["field"] == "notebook", (path, body)
    code, listing = alice.json("GET", "api/jobs", params={"state": "QUEUED"})
    assert all("secret" not in j["notebook"] for j in listing["jobs"])

    # A queued job whose notebook is swapped for a link after submission does not run it.
    code, holder = submit(alice, "sleep.ipynb")  # holds vision's only GPU
    wait_state(alice, holder["id"], {"ADMITTED", "RUNNING"})
    swap = hub.home("alice") / "swap.ipynb"
    swap.write_text(notebook_json("print('mine')"))
    code, queued = submit(alice, "swap.ipynb")
    assert code == 201 and alice.json("GET", f"api/jobs/{queued['id']}")[1]["state"] == "QUEUED"
    swap.unlink()
    os.symlink(bob_secret, swap)
    alice.json("DELETE", f"api/jobs/{holder['id']}")
    done = wait_state(alice, queued["id"], TERMINAL)
    assert done["state"] == "FAILED" and "link" in done["message"], done
    assert alice.call("GET", f"api/jobs/{queued['id']}/output").status_code == 404
    assert "bob only" not in alice.call("GET", f"api/jobs/{queued['id']}/log").text


def test_browser_requests_need_the_xsrf_token(hub):
    import requests

    s = requests.Session()
    s.get(f"{hub.url}hub/login")
    r = s.post(
        f"{hub.url}hub/login",
        data={"username": "alice", "password": "x", "_xsrf": s.cookies.get("_xsrf", path="/hub/")},
        allow_redirects=False,
    )
    assert r.status_code == 302, r.text
    home = s.get(f"{hub.service_url}gpusched/")  # OAuth with the Hub, back with the service's cookie
    assert home.status_code == 200 and "alice" in home.text, home.text[:500]
    xsrf = s.cookies.get("_xsrf", path=f"/services/{hub.name}/")
    assert xsrf and re.search(r"name='xsrf-token' content='([^']+)'", home.text)
    # cookie-authenticated reads work; a write without the XSRF token is refused
    assert s.get(f"{hub.service_url}gpusched/api/jobs").status_code == 200
    r = s.post(f"{hub.service_url}gpusched/api/jobs", json={"notebook": "quick.ipynb"})
    assert r.status_code == 403, r.text
    r = s.post(
        f"{hub.service_url}gpusched/api/jobs", json={"notebook": "quick.ipynb"}, headers={"X-XSRFToken": "forged"}
    )
    assert r.status_code == 403, r.text
    r = s.post(f"{hub.service_url}gpusched/api/jobs", json={"notebook": "quick.ipynb"}, headers={"X-XSRFToken": xsrf})
    assert r.status_code == 201, r.text
    wait_state(ServiceClient(hub.service_url, hub.token("alice")), r.json()["id"], TERMINAL)


@pytest.fixture(scope="module")
def servers(hub):
    """alice's and carol's single-user servers (started together)."""
    for user in ("alice", "carol"):
        assert hub.api("POST", f"users/{user}/server").status_code in (201, 202)
    return {user: hub.start_server(user) for user in ("alice", "carol")}


def test_single_user_servers_forward_as_their_user(hub, servers, tokens, as_user):
    alice_server = ServiceClient(servers["alice"], tokens["alice"])
    code, job = alice_server.json("POST", "api/jobs", json={"notebook": "quick.ipynb"})
    assert code == 201 and job["owner"] == "alice"
    assert job["tenant"] == "vision"
    r = alice_server.call("POST", "api/jobs", json={"notebook": "quick.ipynb"})
    assert r.headers["Location"].startswith("/user/alice/gpusched/api/jobs/")
    # the same job through the service directly
    assert as_user["alice"].json("GET", f"api/jobs/{job['id']}")[0] == 200
    # bob may not use alice's server at all; nor may anyone without a token
    assert ServiceClient(servers["alice"], tokens["bob"]).call("GET", "api/jobs").status_code == 403
    assert ServiceClient(servers["alice"], None).call("GET", "api/jobs").status_code == 403
    # errors pass through unchanged
    code, body = alice_server.json("POST", "api/jobs", json={"notebook": "../bob/secret.ipynb"})
    assert code == 400 and body["field"] == "notebook"
    code, body = alice_server.json("GET", "metrics")
    assert code == 403 and body["error"] == "forbidden"
    wait_state(as_user["alice"], r.json()["id"], TERMINAL)


def test_schedules_pipelines_and_settings_pass_through_a_users_server(servers, tokens, as_user):
    """What the lab panel does from alice's own server: every method the service's routes take is relayed."""
    alice_server = ServiceClient(servers["alice"], tokens["alice"])
    code, sched = alice_server.json("POST", "api/schedules", json={"notebook": "quick.ipynb", "cron": "0 2 * * *"})
    assert code == 201 and sched["owner"] == "alice", sched
    code, paused = alice_server.json("PATCH", f"api/schedules/{sched['id']}", json={"paused": True})
    assert code == 200 and paused["paused"] is True, paused  # the panel's pause/resume
    assert as_user["alice"].json("GET", f"api/schedules/{sched['id']}")[1]["paused"] is True
    code, err = ServiceClient(servers["alice"], tokens["bob"]).json(
        "PATCH", f"api/schedules/{sched['id']}", json={"paused": False}
    )
    assert code == 403, err  # bob may not use alice's server
    assert alice_server.json("DELETE", f"api/schedules/{sched['id']}")[0] == 200

    steps = [{"notebook": "quick.ipynb"}, {"notebook": "quick.ipynb"}]
    code, pipe = alice_server.json("POST", "api/pipelines", json={"steps": steps, "edges": [[0, 1]]})
    assert code == 201 and pipe["steps"][0]["owner"] == "alice", pipe
    assert alice_server.json("GET", f"api/pipelines/{pipe['id']}")[0] == 200
    assert as_user["bob"].json("GET", f"api/pipelines/{pipe['id']}")[0] == 404

    hook = {"webhook": "http://127.0.0.1:9/alice-server", "events": ["failed"]}
    assert alice_server.json("PUT", "api/settings/notify", json={"notify": [hook]}) == (
        200,
        {"notify": [hook], "source": "user"},
    )
    assert as_user["bob"].json("GET", "api/settings/notify")[1]["notify"] == []
    assert alice_server.json("PUT", "api/settings/notify", json={"notify": None})[1]["source"] == "none"
    for step in pipe["steps"]:
        wait_state(as_user["alice"], step["id"], TERMINAL)


def test_admin_dashboards_in_a_users_server_are_for_the_services_admins(hub, servers, tokens):
    """Voila in a user's own server renders admin-only notebooks only for those the service calls admins."""
    board = json.loads(notebook_json("print('for admins')"))
    board["metadata"]["gpusched"] = {"admin_only": True}
    for user in ("alice", "dora"):
        (hub.home(user) / "admin-board.ipynb").write_text(json.dumps(board))
    dora_server = hub.start_server("dora")

    def render(server: str, user: str) -> int | None:
        r = requests.get(
            f"{server}voila/render/admin-board.ipynb", headers={"Authorization": f"token {tokens[user]}"}, timeout=120
        )
        return None if r.status_code == 503 else r.status_code  # 503: the server has not heard from the service yet

    assert wait_for(lambda: render(servers["alice"], "alice"), 30, "alice's server to check with the service") == 403
    assert wait_for(lambda: render(dora_server, "dora"), 60, "dora's server to render the dashboard") == 200
    assert ServiceClient(dora_server, tokens["dora"]).json("GET", "api/me")[1]["admin"] is True
    code, me = ServiceClient(servers["alice"], tokens["alice"]).json("GET", "api/me")
    assert code == 200 and me == {"name": "alice", "admin": False, "tenants": ["vision"], "default_tenant": "vision"}


def test_the_client_finds_the_service_from_inside_a_users_server(hub, servers, tokens, monkeypatch):
    from jupyter_gpusched.client import Client

    for var in ("GPUSCHED_URL", "GPUSCHED_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/alice/")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", servers["alice"])  # what a kernel in alice's server sees
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", tokens["alice"])
    monkeypatch.setenv("JUPYTERHUB_ROOT_DIR", str(hub.home("alice")))
    monkeypatch.chdir(hub.home("alice"))
    client = Client()
    job = client.submit("quick.ipynb")
    assert job["owner"] == "alice" and client.get(job["id"])["id"] == job["id"]


def test_a_tenant_cannot_exceed_its_quota_through_two_servers(hub, servers, tokens, as_user):
    results = {}

    def go(user):
        results[user] = ServiceClient(servers[user], tokens[user]).json(
            "POST", "api/jobs", json={"notebook": "sleep.ipynb"}
        )

    threads = [threading.Thread(target=go, args=(u,)) for u in ("alice", "carol")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ids = {u: r[1]["id"] for u, r in results.items() if r[0] == 201}
    assert len(ids) == 2, results
    admin = as_user["admin"]
    wait_for(
        lambda: any(admin.json("GET", f"api/jobs/{i}")[1]["state"] == "RUNNING" for i in ids.values()),
        60,
        "one job running",
    )
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # a GPU stays free, yet the second vision job waits
        states = sorted(admin.json("GET", f"api/jobs/{i}")[1]["state"] for i in ids.values())
        assert states in (["ADMITTED", "QUEUED"], ["QUEUED", "RUNNING"]), states
        code, queues = admin.json("GET", "api/queues")
        assert queues["queues"]["vision"]["used"] <= 1
        time.sleep(0.3)
    code, cluster = admin.json("GET", "api/cluster")
    assert cluster["free_gpus"] >= 1
    for user, jid in ids.items():
        assert as_user[user].json("DELETE", f"api/jobs/{jid}")[0] == 200


def test_a_job_outlives_its_users_server(hub, servers, tokens, as_user):
    alice_server = ServiceClient(servers["alice"], tokens["alice"])
    (hub.home("alice") / "outlive.ipynb").write_text(notebook_json("import time; time.sleep(2)", "print('still here')"))
    code, job = alice_server.json("POST", "api/jobs", json={"notebook": "outlive.ipynb"})
    assert code == 201, job
    hub.stop_server("alice")
    assert alice_server.call("GET", f"api/jobs/{job['id']}").status_code != 200  # the server is gone
    done = wait_state(as_user["alice"], job["id"], TERMINAL, timeout=120)
    assert done["state"] == "SUCCEEDED", done
    back = ServiceClient(hub.start_server("alice"), tokens["alice"])
    r = back.call("GET", f"api/jobs/{job['id']}/output")
    assert r.status_code == 200 and "still here" in r.text
    r = back.call("GET", f"api/jobs/{job['id']}/log")
    assert r.status_code == 200 and int(r.headers["X-Log-Offset"]) == len(r.content) > 0
    whole = r.content
    # Range requests pass through the user's server both ways (a follower resumes with them)
    r = back.call("GET", f"api/jobs/{job['id']}/log", headers={"Range": "bytes=2-6"})
    assert r.status_code == 206 and r.content == whole[2:7], r.text
    assert r.headers["Content-Range"] == f"bytes 2-6/{len(whole)}"
    r = back.call("GET", f"api/jobs/{job['id']}/log", headers={"Range": f"bytes={len(whole) + 5}-"})
    assert r.status_code == 416 and r.headers["Content-Range"] == f"bytes */{len(whole)}", r.text
    code, listing = back.json("GET", "api/jobs", params={"mine": "true"})
    assert job["id"] in [j["id"] for j in listing["jobs"]]
