"""The JupyterLab extension end to end: a real `jupyter lab`, Debian's Chromium driven by Playwright.

Open Lab, open the GPU Jobs panel, submit a notebook and watch it go QUEUED -> RUNNING -> SUCCEEDED,
follow its log, open its executed notebook; see the server's own message next to a refused field;
submit from the file browser's context menu and the notebook toolbar; screenshot the panel in the
light and dark themes into test-artifacts/.

Needs /usr/bin/chromium (`bash scripts/ci-browser-deps.sh` installs it) and the built lab extension
(`pip install -e .` builds it). Skips, saying so, only when Chromium is missing.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path

import nbformat
import pytest

from jupyter_gpusched.testing.jupyter import Lab

from conftest import PROJECT_ROOT

CHROMIUM = Path(os.environ.get("GPUSCHED_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

if not CHROMIUM.exists():
    pytest.skip(
        f"browser tests need Chromium at {CHROMIUM}: run `bash scripts/ci-browser-deps.sh` (apt-get install chromium)",
        allow_module_level=True,
    )

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402  (only once Chromium is known to be there)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PANEL = "#gpusched-panel"
FORM = "#gpusched-form"


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    """Playwright's sync API runs its own event loop in this thread: give pytest-jupyter's autouse
    fixture a loop of its own to close, instead of the running one."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("lab")).start()
    yield server
    server.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-lab.log").write_text(server.log_tail(200_000))


@pytest.fixture(scope="module")
def page(lab):
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        console: list[str] = []
        pg.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        pg.goto(f"{lab.url}lab?token={lab.token}")
        try:
            pg.wait_for_selector('.jp-SideBar [data-id="gpusched-panel"]', timeout=60_000)
        except Exception:
            (ARTIFACTS / "browser-console.log").write_text("\n".join(console))
            pg.screenshot(path=str(ARTIFACTS / "lab-no-extension.png"))
            raise AssertionError(
                "the GPU Jobs tab never appeared: is the lab extension built and installed "
                "(`pip install -e .`, `jupyter labextension list`)? Browser console in test-artifacts/."
            ) from None
        yield pg
        (ARTIFACTS / "browser-console.log").write_text("\n".join(console))
        browser.close()


@pytest.fixture(autouse=True)
def screenshot_at_end(request, page):
    """What the page looked like when each test ended (helps when one fails in CI)."""
    yield
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-end.png"))


def open_panel(page: Page) -> None:
    if not page.locator(PANEL).is_visible():
        page.click('.jp-SideBar [data-id="gpusched-panel"]')
    expect(page.locator(PANEL)).to_be_visible()


def file_item(page: Page, name: str):
    """The file browser's row for `name`."""
    text = page.locator(".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(name)}$"))
    return page.locator(".jp-DirListing-item").filter(has=text)


def open_file(page: Page, name: str) -> None:
    """Open a notebook from the file browser; wait for its tab to be the current one."""
    if not page.locator(".jp-FileBrowser").is_visible():
        page.click('.jp-SideBar [data-id="filebrowser"]')
    file_item(page, name).dblclick()
    expect(page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current:has-text("{name}")')).to_be_visible()


def job_item(page: Page, job_id: str):
    return page.locator(f'{PANEL} li.jp-GPUSched-job[data-job-id="{job_id}"]')


def newest_job_id(page: Page, notebook: str, known: set[str]) -> str:
    """Id of the job for `notebook` that appeared in the list and is not in `known`."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for item in page.locator(f"{PANEL} li.jp-GPUSched-job").all():
            jid = item.get_attribute("data-job-id")
            if jid not in known and item.locator(".jp-GPUSched-jobName").inner_text() == notebook:
                return jid
        time.sleep(0.1)
    raise AssertionError(f"no new job for {notebook} in the list")


def listed_ids(page: Page) -> set[str]:
    return {i.get_attribute("data-job-id") for i in page.locator(f"{PANEL} li.jp-GPUSched-job").all()}


def test_submit_watch_log_and_output(page: Page, lab: Lab):
    # Fill both GPUs with another job first, so ours waits in line where the panel can see it.
    blocker = lab.api("POST", "jobs", {"notebook": "blocker.ipynb", "gpus": 2}).json()
    lab.wait_for_state(blocker["id"], {"RUNNING"})

    open_file(page, "train.ipynb")  # the form follows the notebook being looked at
    open_panel(page)
    form = page.locator(FORM)
    expect(form.get_by_label("Notebook")).to_have_value("train.ipynb")
    # the parameters cell's rows, editable
    expect(form.get_by_label("Parameter 1 name")).to_have_value("seconds")
    expect(form.get_by_label("Value of seconds")).to_have_value("3.0")
    expect(form.get_by_label("Value of lr")).to_have_value("0.1")
    form.get_by_label("Value of lr").fill("0.05")
    form.get_by_label("GPUs").fill("1")
    form.get_by_label("Priority").select_option("high")

    known = listed_ids(page)
    form.get_by_role("button", name="Submit GPU job").click()
    expect(page.locator(f"{FORM} .jp-GPUSched-notice")).to_contain_text("Submitted train.ipynb as job")
    job_id = newest_job_id(page, "train.ipynb", known)
    item = job_item(page, job_id)

    # Watch the list: QUEUED (behind the blocker, with its place in line) -> RUNNING -> SUCCEEDED.
    seen: list[str] = []
    queued_detail = running_shot = None
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        state = item.get_attribute("data-state")
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "QUEUED" and queued_detail is None:
            detail = item.locator(".jp-GPUSched-jobDetail")
            if detail.count():
                queued_detail = detail.inner_text()
        if state == "RUNNING" and running_shot is None:
            running_shot = ARTIFACTS / "panel-running-light.png"
            page.locator(PANEL).screenshot(path=str(running_shot))
        if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.1)
    assert seen[-1] == "SUCCEEDED", f"states seen: {seen}; server log:\n{lab.log_tail()}"
    assert "QUEUED" in seen and "RUNNING" in seen, seen
    assert seen.index("QUEUED") < seen.index("RUNNING") < seen.index("SUCCEEDED"), seen
    assert queued_detail and "#1 in line" in queued_detail and "starts" in queued_detail, queued_detail
    expect(item.locator(".jp-GPUSched-jobDetail")).to_contain_text(re.compile(r"cells (\d+)/\1\b"))  # all done
    expect(item.locator(".jp-GPUSched-jobMeta")).to_contain_text("1 GPU · high")

    # The log, in a main-area tab.
    item.get_by_role("button", name="Log").click()
    log = page.locator(f"#gpusched-log-{job_id}")
    expect(log).to_be_visible()
    expect(log.locator(".jp-GPUSched-logStatus")).to_contain_text("log complete", timeout=30_000)
    log_text = log.locator(".jp-GPUSched-logText").inner_text()
    assert log_text.strip(), "the log view stayed empty"
    assert log_text == lab.api("GET", f"jobs/{job_id}/log").text, "the log view differs from the server's log"

    # The executed notebook: saved next to the original as train.<id>.ipynb and opened.
    item.get_by_role("button", name="Output").click()
    out_name = f"train.{job_id}.ipynb"
    expect(page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current:has-text("{out_name}")')).to_be_visible()
    notebook = page.get_by_role("tabpanel", name=out_name, exact=True)
    expect(notebook.locator(".jp-OutputArea-output").first).to_contain_text("step 0 lr=0.05", timeout=30_000)
    expect(notebook).to_contain_text("trained with 0.05")
    saved = nbformat.read(str(lab.root / out_name), as_version=4)  # sources as strings
    assert any("trained with 0.05" in "".join(o.get("text", "")) for c in saved["cells"] for o in c.get("outputs", []))
    injected = "".join(c["source"] for c in saved["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert "seconds = 3.0" in injected and "lr = 0.05" in injected, injected  # 3.0 stays a float
    # the form still points at the notebook, not at the executed copy
    expect(page.locator(FORM).get_by_label("Notebook")).to_have_value("train.ipynb")


def test_refused_form_shows_the_servers_message_next_to_the_field(page: Page, lab: Lab):
    open_panel(page)
    form = page.locator(FORM)
    form.get_by_label("Notebook").fill("other.ipynb")
    form.get_by_label("GPUs").focus()  # leaving the path field loads that notebook's parameters
    expect(form.get_by_label("Value of x")).to_have_value("1")
    before = len(lab.api("GET", "jobs").json()["jobs"])

    form.get_by_label("GPUs").fill("99")
    form.get_by_role("button", name="Submit GPU job").click()
    error = page.locator("#gpusched-form-gpus-error")
    expect(error).to_contain_text("99 GPUs requested but the cluster has 2")
    expect(form.get_by_label("GPUs")).to_have_attribute("aria-invalid", "true")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-error-light.png"))

    # a parameter name the server refuses: its message sits on that row
    form.get_by_label("GPUs").fill("1")
    expect(error).to_have_count(0)  # editing the field clears its message
    form.get_by_role("button", name="+ Add parameter").click()
    rows = form.locator(".jp-GPUSched-param")
    last = rows.nth(rows.count() - 1)
    last.get_by_placeholder("name").fill("class")
    last.get_by_placeholder("value").fill("3")
    form.get_by_role("button", name="Submit GPU job").click()
    expect(last.locator(".jp-GPUSched-fieldError")).to_contain_text(
        "parameter name 'class' is not a valid Python identifier"
    )
    last.get_by_role("button", name="Remove parameter class").click()

    assert len(lab.api("GET", "jobs").json()["jobs"]) == before, "a refused submit must not queue anything"


def test_submit_from_file_browser_context_menu_and_toolbar(page: Page, lab: Lab):
    page.click('.jp-SideBar [data-id="filebrowser"]')
    file_item(page, "other.ipynb").click(button="right")
    page.locator('.lm-Menu-item:has-text("Submit as GPU job…")').click()

    expect(page.locator(PANEL)).to_be_visible()
    form = page.locator(FORM)
    expect(form.get_by_label("Notebook")).to_have_value("other.ipynb")
    expect(form.get_by_label("Value of x")).to_have_value("1")
    expect(form.get_by_label("GPUs")).to_be_focused()  # the command puts the keyboard in the form
    form.get_by_label("GPUs").fill("1")
    known = listed_ids(page)
    form.get_by_label("GPUs").press("Enter")  # keyboard submit
    job_id = newest_job_id(page, "other.ipynb", known)
    job = lab.wait_for_state(job_id, {"SUCCEEDED", "FAILED"})
    assert job["state"] == "SUCCEEDED", job
    expect(job_item(page, job_id)).to_have_attribute("data-state", "SUCCEEDED", timeout=15_000)

    # the notebook toolbar button fills the form with that notebook
    open_file(page, "blocker.ipynb")
    page.click('.jp-SideBar [data-id="filebrowser"]')  # hide the panel: the button must show it
    page.get_by_role("tabpanel", name="blocker.ipynb", exact=True).locator(".jp-GPUSched-toolbarButton").click()
    expect(form.get_by_label("Notebook")).to_have_value("blocker.ipynb")
    expect(form.get_by_label("Value of seconds")).to_have_value("6")

    # the status bar item counts jobs and free GPUs, and opens the panel
    status = page.locator(".jp-GPUSched-status")
    expect(status).to_contain_text("GPU jobs:")
    expect(status).to_contain_text("GPUs free")
    page.click('.jp-SideBar [data-id="filebrowser"]')
    status.click()
    expect(page.locator(PANEL)).to_be_visible()


def test_panel_screenshots_light_and_dark(page: Page, lab: Lab):
    open_panel(page)
    panel = page.locator(PANEL)
    # GET me: the server's owner is its admin, and the form names their default tenant
    expect(panel.locator(".jp-GPUSched-jobs h3")).to_have_text("All jobs")
    expect(page.locator(f"{FORM}-tenant option").first).to_have_text("my default (default)")
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "true")
    page.wait_for_timeout(500)
    panel.screenshot(path=str(ARTIFACTS / "panel-light.png"))
    page.screenshot(path=str(ARTIFACTS / "lab-light.png"))
    light_bg = panel.evaluate("n => getComputedStyle(n).backgroundColor")

    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-light", "false")
    page.wait_for_timeout(500)
    panel.screenshot(path=str(ARTIFACTS / "panel-dark.png"))
    page.screenshot(path=str(ARTIFACTS / "lab-dark.png"))
    dark_bg = panel.evaluate("n => getComputedStyle(n).backgroundColor")
    assert light_bg != dark_bg, "the panel does not follow the theme"

    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
