"""The admin dashboard (notebooks/dashboard.ipynb) against a real server: it runs top to
bottom in a real kernel (nbclient), Voila serves it at /voila/render/... to an admin, and
refuses it (403) to a signed-in user who is not one.

The server here knows two users by token (TokenUsers below): the server's token is
"alice", an admin (c.GPUSched.admin_users), and "bob-token" is "bob", who is not. When
../shared/traces is there, the store is seeded with 8 days of real per-minute demand (a
Helios Earth VC) so the dashboard shows the selected forecast with its skill."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest
import requests
from jupyter_server.auth import IdentityProvider, User
from nbclient import NotebookClient

from jupyter_gpusched.testing.browser import axe_violations
from jupyter_gpusched.testing.jupyter import new_live_server
from jupyter_gpusched.testing.notebooks import make_notebook

from conftest import PROJECT_ROOT, TRACES

pytestmark = pytest.mark.timeout(240)

DASHBOARD = PROJECT_ROOT / "notebooks" / "dashboard.ipynb"
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "dashboard"
HELIOS_VC = TRACES / "sensetime_helios_2020" / "earth_vcs" / "vc6YE_cluster_sequence_vc.csv.gz"


class TokenUsers(IdentityProvider):
    """Test identities: the server token is alice (admin), 'bob-token' is bob (not an admin)."""

    async def get_user_token(self, handler):
        token = self.get_token(handler)
        if token and token == "bob-token":
            return User("bob")
        if token and token == self.token:
            return User("alice")
        return None


def seed_usage(data_dir: Path, days: int = 8) -> bool:
    """Write `days` of real per-minute demand (Helios vc6YE), ending now, into the store."""
    if not HELIOS_VC.is_file():
        return False
    import pandas as pd
    from sqlalchemy import insert
    from sqlalchemy.orm import Session

    from jupyter_gpusched.store import Store, UsageRow, default_url

    df = pd.read_csv(HELIOS_VC, usecols=["running_gpu_num", "pending_gpu_num"], nrows=days * 1440)
    end = int(time.time() // 60) - 1
    start = end - len(df) + 1
    rows = [
        {"minute": start + i, "tenant": "default", "requested": int(r + p), "allocated": int(r)}
        for i, (r, p) in enumerate(zip(df["running_gpu_num"], df["pending_gpu_num"], strict=True))
    ]
    store = Store(default_url(data_dir))
    with Session(store.engine) as db, db.begin():
        db.execute(insert(UsageRow), rows)
    store.close()
    return True


# (owner, GPUs, hours held, hours executing, hours idle when reclaimed or None): what the kernels panel plots
SEEDED_KERNELS = (("alice", 1, 2.0, 0.5, None), ("alice", 1, 1.5, 0.25, 1.0), ("bob", 2, 1.0, 0.4, None))


def seed_kernels(data_dir: Path, root_dir: Path) -> None:
    """GPU kernels' requests that held GPUs over the last hours (some busy time, one reclaimed idle), ended
    before the server starts, so the dashboard's "held vs executing, idle reclaimed" plot has bars. Written by
    the live service itself on a virtual clock, the way provisioners write them (docs/interactive.md)."""
    from jupyter_gpusched.backends.local import LocalBackend
    from jupyter_gpusched.service import Service, ServiceConfig
    from jupyter_gpusched.store import default_url

    now = [time.time() - 3 * 3600]
    service = Service(
        ServiceConfig(db_url=default_url(data_dir), data_dir=data_dir, root_dir=root_dir, memory_check_interval=0.0),
        LocalBackend(virtual_gpus=4),
        lambda: now[0],
    )
    for i, (owner, gpus, held_h, busy_h, idle_h) in enumerate(SEEDED_KERNELS):
        job = service.submit(notebook=f"kernel:seeded-{i}", owner=owner, gpus=gpus, interactive=True)
        service.tick()
        assert job.state.value == "RUNNING", job
        now[0] += held_h * 3600
        service.info[job.id].busy_s = busy_h * 3600
        if idle_h is not None:
            service.info[job.id].reclaimed_idle_s = idle_h * 3600
        service.cancel(job.id, actor="kernel seeded: shut down")
        now[0] -= held_h * 3600  # the kernels overlapped
    service.tick()
    service.store.close()


@pytest.fixture(scope="module")
def dash_server(tmp_path_factory):
    base = tmp_path_factory.mktemp("dash")
    config_dir = base / "config"
    config_dir.mkdir()
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps(
            {
                "ServerApp": {
                    "jpserver_extensions": {
                        "jupyter_gpusched": True,
                        "jupyter_gpusched.server.dashboard": True,
                        "voila.server_extension": True,
                    },
                    "identity_provider_class": "test_dashboard.TokenUsers",
                },
                "GPUSched": {
                    "admin_users": ["alice"],
                    "identity_usernames": True,
                    "local_gpus": 2,
                    # a budget and a price: the showback section has both to draw
                    "tenants": {"default": {"quota": 2, "budget": {"gpu_hours": 100, "period": "month"}}},
                    "pools": {"local": {"price_per_gpu_hour": 2.5}},
                    # a learnt spot share: the pools chart says how much of the wanted GPUs is meant for spot
                    "scaling": {"spot_share": "auto"},
                },
            }
        )
    )
    server = new_live_server(base)
    seeded = seed_usage(server.data)
    seed_kernels(server.data, server.root)
    (server.root / "notebooks").mkdir()
    shutil.copy(DASHBOARD, server.root / "notebooks" / "dashboard.ipynb")
    make_notebook(server.root / "notebooks" / "hold.ipynb", "import time; time.sleep(30)")
    old = {k: os.environ.get(k) for k in ("JUPYTER_CONFIG_DIR", "PYTHONPATH")}
    os.environ["JUPYTER_CONFIG_DIR"] = str(config_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), *filter(None, [old["PYTHONPATH"]])])
    try:
        server.start()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    server.seeded = seeded
    # some activity: one job holding both GPUs, two waiting behind it
    s = requests.Session()
    s.headers["Authorization"] = f"token {server.token}"
    api = f"{server.url}gpusched/api/"
    for gpus, prio in ((2, "normal"), (1, "low"), (2, "high")):
        r = s.post(api + "jobs", json={"notebook": "notebooks/hold.ipynb", "gpus": gpus, "priority": prio})
        assert r.status_code == 201, r.text
    yield server
    for job in s.get(api + "jobs").json()["jobs"]:
        if job["state"] in ("QUEUED", "ADMITTED", "RUNNING"):
            s.delete(api + f"jobs/{job['id']}")
    server.stop()


def widget_models(nb) -> list[dict]:
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    return list(state.values())


def test_dashboard_runs_top_to_bottom_in_a_real_kernel(dash_server, monkeypatch):
    nb = nbformat.read(DASHBOARD, as_version=4)
    assert nb.metadata["gpusched"]["admin_only"] is True
    monkeypatch.setenv(
        "JUPYTER_RUNTIME_DIR", str(dash_server.runtime)
    )  # the kernel finds the server like a user's would
    for var in ("GPUSCHED_URL", "GPUSCHED_TOKEN", "VOILA_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(dash_server.root / "notebooks")}},
        store_widget_state=True,
    )
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    models = widget_models(nb)
    plots = [  # widgets.Plot: an <img> of a PNG with its text alternative
        re.fullmatch(r'<img class="gpusched-plot" src="data:image/png;base64,([^"]+)" alt="([^"]+)" [^>]*>', v)
        for m in models
        if m["model_name"] == "HTMLModel" and (v := m["state"].get("value", "")).startswith("<img")
    ]
    assert len(plots) == 9, "eight dashboard plots (GPU kernels and showback included) and the forecast chart"
    pngs = [base64.b64decode(p[1]) for p in plots if p]
    assert len(pngs) == 9 and all(p[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert all(p[2].startswith("Chart: ") for p in plots if p)
    pools_alt = [p[2] for p in plots if p and "Pools: " in p[2]]
    assert len(pools_alt) == 1 and "of them meant for spot pools (learnt from the last week" in pools_alt[0], pools_alt
    ARTIFACTS.mkdir(parents=True, exist_ok=True)  # what the dashboard drew, for people to look at
    for i, png in enumerate(pngs):
        (ARTIFACTS / f"panel-{i}.png").write_bytes(png)
    kernels = requests.get(  # what the kernels panel drew its bars from: the seeded requests
        f"{dash_server.url}gpusched/api/interactive",
        headers={"Authorization": f"token {dash_server.token}"},
        timeout=30,
    ).json()["users"]
    assert kernels["alice"]["held_gpu_hours"] == pytest.approx(3.5) and kernels["alice"]["reclaims"] == 1
    assert kernels["alice"]["reclaimed_idle_gpu_hours"] == pytest.approx(1.0)
    assert kernels["bob"]["executing_gpu_hours"] == pytest.approx(0.8)
    html = " ".join(str(m["state"].get("value", "")) for m in models if m["model_name"] == "HTMLModel")
    assert "GPUs allocated" in html and "updated" in html
    assert "queued" in html or "No alerts" in html or "alert" in html
    # showback: the budget table (the running job spends it) and the per-day plots
    assert "Showback this month" in html and "used / budget" in html
    assert re.search(r"<td>default</td><td>[\d.]+ GPU-h / 100\.0 GPU-h</td><td[^>]*>ok</td><td>soft</td>", html), html
    if dash_server.seeded:  # 8 days of real demand: the model selected by backtest, with its skill
        fc = requests.get(
            f"{dash_server.url}gpusched/api/forecast",
            headers={"Authorization": f"token {dash_server.token}"},
            timeout=60,
        ).json()
        assert fc["model"] == fc["skill"]["selection"]["model"], fc["note"]


def test_voila_renders_the_dashboard_for_an_admin(dash_server):
    r = requests.get(
        f"{dash_server.url}voila/render/notebooks/dashboard.ipynb",
        headers={"Authorization": f"token {dash_server.token}"},
        timeout=180,
    )
    assert r.status_code == 200, r.text[-2000:]
    body = r.text
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "voila-dashboard.html").write_text(body)
    assert "GPU cluster" in body and "admin dashboard" in body
    assert "There was an error when executing cell" not in body and "Traceback" not in body
    assert "application/vnd.jupyter.widget-view+json" in body  # the widgets were rendered


def test_voila_refuses_the_dashboard_to_a_non_admin(dash_server):
    bob = {"Authorization": "token bob-token"}
    assert (
        requests.get(f"{dash_server.url}gpusched/api/cluster", headers=bob, timeout=30).status_code == 200
    )  # bob is signed in
    r = requests.get(f"{dash_server.url}voila/render/notebooks/dashboard.ipynb", headers=bob, timeout=60)
    assert r.status_code == 403
    anonymous = requests.get(
        f"{dash_server.url}voila/render/notebooks/dashboard.ipynb", timeout=30, allow_redirects=False
    )
    assert anonymous.status_code in (302, 403)  # to the login page, never the dashboard


def test_the_dashboard_loads_in_chromium_without_console_errors(dash_server):
    """An admin opens the Voila dashboard in headless Chromium: the widgets and plots appear, the
    page logs no error, passes axe-core's WCAG 2.1 A/AA rules (each plot has a text alternative), and a
    full-page screenshot is kept in test-artifacts/dashboard/."""
    chromium = Path(os.environ.get("GPUSCHED_CHROMIUM", "/usr/bin/chromium"))
    if not chromium.exists():
        pytest.skip(f"needs Chromium at {chromium}: run `bash scripts/ci-browser-deps.sh`")
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    console: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(
                viewport={"width": 1400, "height": 3600}
            )  # the whole dashboard (Voila scrolls inside its own panel)
            page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
            # This machine has no internet: Voila's template asks CDNs for MathJax and icon fonts.
            # Those may fail; a failed request to the server itself may not.
            failed: list[str] = []
            page.on("requestfailed", lambda req: failed.append(req.url))
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.goto(
                f"{dash_server.url}voila/render/notebooks/dashboard.ipynb?token={dash_server.token}", timeout=180_000
            )
            # the widget manager has drawn the plots (matplotlib PNGs: widgets.Plot, an <img> with alt text)
            page.wait_for_selector("img.gpusched-plot", timeout=120_000)
            page.wait_for_timeout(1500)  # let late renders (and any late errors) land
            plots = page.locator("img.gpusched-plot").count()
            page.screenshot(path=str(ARTIFACTS / "voila-dashboard.png"), full_page=True)
            text = page.inner_text("body")
            # WCAG 2.1 A/AA on the whole page (it is all rendered output): text contrast, and a text
            # alternative for every plot
            audit = axe_violations(page, "body", exclude=())
            alts = page.locator("img.gpusched-plot").evaluate_all("ns => ns.map(n => n.alt)")
        finally:
            (ARTIFACTS / "voila-console.log").write_text("\n".join(console))
            browser.close()
    assert "GPU cluster" in text and "Traceback" not in text
    assert plots == 9, f"{plots} plots drawn, not 9"
    assert not audit, audit
    assert len(alts) == plots and all(a.startswith("Chart: ") and len(a) > 20 for a in alts), alts
    assert any("Cluster utilisation" in a and "now:" in a for a in alts), alts
    local = [u for u in failed if "127.0.0.1" in u and "favicon" not in u]
    assert not local, local
    offline = "net::ERR_NAME_NOT_RESOLVED"  # the console's line for each failed CDN request
    real = [e for e in errors if offline not in e and "favicon" not in e]
    assert not real, real
