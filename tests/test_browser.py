"""The JupyterLab extension end to end: a real `jupyter lab`, Debian's Chromium driven by Playwright.

Open Lab, open the GPU Jobs panel, submit a notebook and watch it go QUEUED -> RUNNING -> SUCCEEDED,
follow its log, view its executed notebook read-only and download it; see the server's own message
next to a refused field; submit from the file browser's context menu and the notebook toolbar; a failed
and a cancelled job's progress and output; screenshot the panel and the output viewer in the light and
dark themes into test-artifacts/. Every test fails on an error in the browser console or an uncaught
error in the page.

Needs /usr/bin/chromium (`bash scripts/ci-browser-deps.sh` installs it) and the built lab extension
(`pip install -e .` or `jlpm build` builds it into jupyter_gpusched/labextension/, which Lab is pointed
at, so the test runs this checkout's build). Skips, saying so, only when Chromium is missing.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
import requests

from jupyter_gpusched.testing.browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    BrowserErrors,
    axe_violations,
    jp_asyncio_loop,  # noqa: F401  (pytest-jupyter's loop, replaced)
    serve_this_build,
    set_theme,
)
from jupyter_gpusched.testing.jupyter import Lab
from jupyter_gpusched.testing.notebooks import new_notebook
from jupyter_gpusched.testing.waits import wait_until

if not CHROMIUM.exists():
    pytest.skip(
        f"browser tests need Chromium at {CHROMIUM}: run `bash scripts/ci-browser-deps.sh` (apt-get install chromium)",
        allow_module_level=True,
    )

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402  (only once Chromium is known to be there)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PANEL = "#gpusched-panel"
FORM = "#gpusched-form"

# A notebook whose second code cell fails (a markdown cell first: the viewer renders it).
FAILS = new_notebook("print('before the failure')", "raise ValueError('failed on purpose')")
FAILS.cells.insert(0, nbformat.v4.new_markdown_cell("# Fails on purpose\n\nThe *second* cell raises."))
# One quick cell, then one that waits long enough to be cancelled.
SLOW = new_notebook("print('first cell done', flush=True)", "import time\ntime.sleep(120)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("lab")
    server = Lab(base)
    serve_this_build(server, base)
    nbformat.write(FAILS, str(server.root / "fails.ipynb"))
    nbformat.write(SLOW, str(server.root / "slow.ipynb"))
    server.start()
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
        pg.on("console", lambda m: BROWSER_ERRORS.console(m))
        pg.on("pageerror", lambda e: BROWSER_ERRORS.page_error(e))
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


BROWSER_ERRORS = BrowserErrors()


@pytest.fixture
def browser_errors(page) -> BrowserErrors:
    return BROWSER_ERRORS


@pytest.fixture(autouse=True)
def screenshot_at_end(request, page):
    """What the page looked like when each test ended (helps when one fails in CI); then no console
    error or uncaught page error may have happened during the test (page load included, for the first)."""
    yield
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-end.png"))
    for _ in range(3):  # a dialog a failed test left open would block every later test's clicks
        if not page.get_by_role("dialog").count():
            break
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
    page.wait_for_timeout(300)  # a last refresh's errors arrive
    unexpected = BROWSER_ERRORS.take_unexpected()
    assert not unexpected, "errors in the browser console:\n" + "\n".join(unexpected)


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

    # The executed notebook: shown read-only in a main-area tab; no file written, no kernel started.
    files_before = sorted(p.name for p in lab.root.iterdir())
    kernels_before = {k["id"] for k in lab_get(lab, "api/kernels")}
    item.get_by_role("button", name="Output").click()
    out_name = f"train.{job_id}.ipynb"
    expect(page.locator(f'.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current:has-text("{out_name}")')).to_be_visible()
    viewer = page.locator(f"#gpusched-output-{job_id}")
    expect(viewer.locator(".jp-OutputArea-output").first).to_contain_text("step 0 lr=0.05", timeout=30_000)
    expect(viewer).to_contain_text("trained with 0.05")
    expect(viewer.locator(".jp-GPUSched-source").first).to_contain_text("seconds = 3.0")
    expect(viewer.locator(".jp-GPUSched-source span[class]").first).to_be_attached()  # highlighted
    page.wait_for_timeout(500)
    viewer.screenshot(path=str(ARTIFACTS / "output-viewer-light.png"))

    # Download: the server's bytes, named <name>.<id>.ipynb
    with page.expect_download() as download:
        viewer.get_by_role("button", name="Download").click()
    assert download.value.suggested_filename == out_name
    saved_at = Path(download.value.path())
    assert saved_at.read_bytes() == lab.api("GET", f"jobs/{job_id}/output").content
    saved = nbformat.read(str(saved_at), as_version=4)  # sources as strings
    assert any("trained with 0.05" in "".join(o.get("text", "")) for c in saved["cells"] for o in c.get("outputs", []))
    injected = "".join(c["source"] for c in saved["cells"] if "injected-parameters" in c["metadata"].get("tags", []))
    assert "seconds = 3.0" in injected and "lr = 0.05" in injected, injected  # 3.0 stays a float

    assert sorted(p.name for p in lab.root.iterdir()) == files_before, "opening the output wrote into the folder"
    assert {k["id"] for k in lab_get(lab, "api/kernels")} == kernels_before, "opening the output started a kernel"
    # the form still points at the notebook
    expect(page.locator(FORM).get_by_label("Notebook")).to_have_value("train.ipynb")


def lab_get(lab: Lab, path: str):
    """GET one of Jupyter's own REST endpoints (api/kernels, ...) with the server's token."""
    r = requests.get(f"{lab.url}{path}", headers={"Authorization": f"token {lab.token}"}, timeout=10)
    r.raise_for_status()
    return r.json()


def test_refused_form_shows_the_servers_message_next_to_the_field(page: Page, lab: Lab, browser_errors):
    # Chromium logs every 4xx answer as a console error: here the server refuses on purpose, twice.
    browser_errors.allow("status of 400 (Bad Request)", "/gpusched/api/jobs?")
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
    error_audit = axe_violations(page, PANEL)  # WCAG 2.1 A/AA with a field's error shown (its red on the theme)
    assert not error_audit, error_audit

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

    # "Notify me": a target the server refuses shows its message at the field; a good one is the job's notify
    notify = form.get_by_label("Notify me")
    notify.fill("not an address")
    form.get_by_role("button", name="Submit GPU job").click()
    notify_error = page.locator("#gpusched-form-notify-error")
    expect(notify_error).to_contain_text("not an address")
    expect(notify).to_have_attribute("aria-invalid", "true")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-notify-error.png"))
    assert len(lab.api("GET", "jobs").json()["jobs"]) == before
    notify.fill("http://127.0.0.1:9/gpu-hook, https://hooks.example.org/gpu")
    expect(notify_error).to_have_count(0)
    known = listed_ids(page)
    form.get_by_role("button", name="Submit GPU job").click()
    job_id = newest_job_id(page, "other.ipynb", known)
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-notify.png"))
    detail = lab.api("GET", f"jobs/{job_id}").json()
    assert detail["notify"] and [t.get("webhook") for t in detail["notify"]] == [
        "http://127.0.0.1:9/gpu-hook",
        "https://hooks.example.org/gpu",
    ], detail
    notify.fill("")  # the next tests' jobs get the defaults


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
    button_audit = axe_violations(page, ".jp-GPUSched-toolbarButton")  # WCAG 2.1 A/AA (no aria-pressed on it)
    assert not button_audit, button_audit
    page.click('.jp-SideBar [data-id="filebrowser"]')  # hide the panel: the button must show it
    page.get_by_role("tabpanel", name="blocker.ipynb", exact=True).locator(".jp-GPUSched-toolbarButton").click()
    expect(form.get_by_label("Notebook")).to_have_value("blocker.ipynb")
    expect(form.get_by_label("Value of seconds")).to_have_value("6")

    # the status bar item counts jobs and free GPUs, and opens the Jobs view (issue 18)
    status = page.locator(".jp-GPUSched-status")
    expect(status).to_contain_text("GPU jobs:")
    expect(status).to_contain_text("GPUs free")
    status.click()
    expect(page.locator(".jp-GPUSched-jobsTable")).to_be_visible()


def test_failed_and_cancelled_jobs_show_their_progress_and_output(page: Page, lab: Lab):
    open_panel(page)
    failed = lab.api("POST", "jobs", {"notebook": "fails.ipynb", "gpus": 1}).json()
    slow = lab.api("POST", "jobs", {"notebook": "slow.ipynb", "gpus": 1}).json()
    assert lab.wait_for_state(failed["id"], {"SUCCEEDED", "FAILED"})["state"] == "FAILED"
    # cancel the slow one once its first cell has run: its partial executed notebook exists
    slow_url = f"jobs/{slow['id']}"
    wait_until(
        lambda: (lab.api("GET", slow_url).json().get("progress") or [0])[0] >= 1,
        60,
        lambda: f"slow.ipynb's first cell to finish: {lab.api('GET', slow_url).json()}",
    )
    assert lab.api("DELETE", f"jobs/{slow['id']}").status_code == 200
    lab.wait_for_state(slow["id"], {"CANCELLED"})

    # The failed job's bar is in the error colour, not the brand blue of a running one.
    item = job_item(page, failed["id"])
    expect(item).to_have_attribute("data-state", "FAILED", timeout=15_000)
    bar = item.locator("progress.jp-GPUSched-progress")
    expect(bar).to_have_class(re.compile(r"\bjp-mod-failed\b"))
    error_colour = page.evaluate("getComputedStyle(document.body).getPropertyValue('--jp-error-color1').trim()")
    accent = bar.evaluate("n => getComputedStyle(n).accentColor")
    assert accent == page.evaluate(
        "c => { const d = document.createElement('div'); d.style.color = c; document.body.append(d);"
        " const v = getComputedStyle(d).color; d.remove(); return v; }",
        error_colour,
    ), f"the failed job's bar is {accent}, not the error colour {error_colour}"

    # Secondary actions use Lab's minimal button, not the heavy grey "reject" style.
    for name in ("Log", "Output", "Resubmit"):
        button = item.get_by_role("button", name=re.compile(rf"^{name}\b"))
        expect(button).to_have_class(re.compile(r"\bjp-mod-minimal\b"))
        expect(button).not_to_have_class(re.compile(r"\bjp-mod-reject\b"))
    expect(page.locator(FORM).get_by_role("button", name="+ Add parameter")).to_have_class(
        re.compile(r"\bjp-mod-minimal\b")
    )
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-failed-light.png"))

    # Its output: the markdown cell rendered, the cell that ran, and the error.
    item.get_by_role("button", name=re.compile(r"^Output\b")).click()
    viewer = page.locator(f"#gpusched-output-{failed['id']}")
    expect(viewer.locator(".jp-RenderedMarkdown h1")).to_contain_text("Fails on purpose")
    expect(viewer.locator(".jp-RenderedMarkdown em")).to_have_text("second")
    expect(viewer).to_contain_text("before the failure")
    expect(viewer.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_contain_text("failed on purpose")
    page.wait_for_timeout(500)
    viewer.screenshot(path=str(ARTIFACTS / "output-viewer-failed-light.png"))

    # The cancelled job ran a cell: it has an Output button, and its output has that cell's print.
    cancelled = job_item(page, slow["id"])
    expect(cancelled).to_have_attribute("data-state", "CANCELLED", timeout=15_000)
    cancelled.get_by_role("button", name=re.compile(r"^Output\b")).click()
    expect(page.locator(f"#gpusched-output-{slow['id']}")).to_contain_text("first cell done")


def test_panel_screenshots_light_and_dark(page: Page, lab: Lab):
    open_panel(page)
    panel = page.locator(PANEL)
    # GET me: the server's owner is its admin, and the form names their default tenant
    expect(panel.locator(".jp-GPUSched-jobs h3")).to_have_text("All jobs")
    expect(page.locator(f"{FORM}-tenant option").first).to_have_text("my default (default)")
    set_theme(page, "JupyterLab Light")
    panel.screenshot(path=str(ARTIFACTS / "panel-light.png"))
    page.screenshot(path=str(ARTIFACTS / "lab-light.png"))
    light_bg = panel.evaluate("n => getComputedStyle(n).backgroundColor")

    viewer = page.locator(".jp-GPUSched-output").first  # an executed notebook an earlier test opened
    if viewer.count():
        page.evaluate(f"window.jupyterapp.shell.activateById('{viewer.get_attribute('id')}')")
        viewer.screenshot(path=str(ARTIFACTS / "output-viewer-light2.png"))

    set_theme(page, "JupyterLab Dark")
    panel.screenshot(path=str(ARTIFACTS / "panel-dark.png"))
    if viewer.count():
        viewer.screenshot(path=str(ARTIFACTS / "output-viewer-dark.png"))
    page.screenshot(path=str(ARTIFACTS / "lab-dark.png"))
    dark_bg = panel.evaluate("n => getComputedStyle(n).backgroundColor")
    assert light_bg != dark_bg, "the panel does not follow the theme"

    set_theme(page, "JupyterLab Light")


def test_a_waiting_pipeline_step_shows_its_badge_and_the_pipeline_view(page: Page, lab: Lab):
    """Issue 14: a step waiting for its dependency is WAITING in the list and the status bar; its Pipeline
    button opens a view of the steps and their states."""
    r = lab.api(
        "POST", "pipelines", {"steps": [{"notebook": "slow.ipynb"}, {"notebook": "fails.ipynb"}], "edges": [[0, 1]]}
    )
    assert r.status_code == 201, r.text
    first, second = (s["id"] for s in r.json()["steps"])
    try:
        open_panel(page)
        waiting = job_item(page, second)
        expect(waiting.locator(".jp-GPUSched-state-WAITING")).to_have_text("WAITING", timeout=20_000)
        expect(waiting).to_contain_text(f"waits for {first[:8]}")
        expect(page.locator(".jp-GPUSched-status")).to_contain_text("1 waiting")
        waiting.get_by_role("button", name=re.compile("^Pipeline of")).click()
        view = page.locator(".jp-GPUSched-pipeline")
        expect(view.locator(".jp-GPUSched-pipelineStep")).to_have_count(2)
        expect(view.locator('.jp-GPUSched-pipelineStep[data-state="WAITING"]')).to_contain_text("after step 0")
        page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-pipeline-waiting-light.png"))
        view.screenshot(path=str(ARTIFACTS / "pipeline-view-light.png"))
        page.screenshot(path=str(ARTIFACTS / "lab-pipeline-light.png"))
        # Cancelling the first step cancels the waiting one, with the reason shown in the view.
        assert lab.api("DELETE", f"jobs/{first}").status_code == 200
        expect(view.locator(".jp-GPUSched-pipelineStep").nth(1)).to_contain_text("CANCELLED", timeout=30_000)
        expect(view.locator(".jp-GPUSched-pipelineStep").nth(1)).to_contain_text(f"dependency {first}")
        view.screenshot(path=str(ARTIFACTS / "pipeline-view-cancelled-light.png"))
    finally:
        lab.api("DELETE", f"jobs/{first}")


def test_run_a_pipeline_from_the_panel_shows_a_refusal_at_its_row_then_the_view(page: Page, lab: Lab, browser_errors):
    """Issue 14: "Run a pipeline…" in the panel: notebooks in order, each after the previous one; the
    server's refusal of one step is shown at that row; once sent, the pipeline view shows the steps."""
    browser_errors.allow("status of 400 (Bad Request)", "/gpusched/api/pipelines")  # refused on purpose
    open_panel(page)
    views = page.locator('.jp-MainAreaWidget[id^="gpusched-pipeline-"]')
    views_before = {views.nth(i).get_attribute("id") for i in range(views.count())}
    page.locator(PANEL).get_by_role("button", name="Run a pipeline…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Run a pipeline")
    first_row = dialog.get_by_label("Step 0", exact=True)
    expect(first_row).to_be_focused()  # keyboard: the first notebook is where typing goes
    first_row.fill("slow.ipynb")
    dialog.get_by_label("Step 1", exact=True).fill("missing.ipynb")
    expect(dialog.get_by_label("Each step runs after the previous one")).to_be_checked()
    dialog.get_by_label("GPUs per step").fill("1")
    page.screenshot(path=str(ARTIFACTS / "pipeline-dialog-light.png"))
    dialog.get_by_role("button", name="Run pipeline").click()

    # refused: the dialog is back with the server's message at step 1's row, the rows as they were
    dialog = page.get_by_role("dialog")
    error = dialog.locator("#gpusched-pipeline-step-1-error")
    expect(error).to_contain_text("step 1")
    expect(dialog.get_by_label("Step 1", exact=True)).to_have_attribute("aria-invalid", "true")
    expect(dialog.get_by_label("Step 1", exact=True)).to_be_focused()
    expect(dialog.get_by_label("Step 0", exact=True)).to_have_value("slow.ipynb")
    dialog.screenshot(path=str(ARTIFACTS / "pipeline-dialog-error-light.png"))
    dialog.get_by_label("Step 1", exact=True).fill("fails.ipynb")
    page.keyboard.press("Enter")  # Enter in a field runs the pipeline (the dialog's default button)

    expect(page.get_by_role("dialog")).to_have_count(0)
    tabs = page.locator('.jp-MainAreaWidget[id^="gpusched-pipeline-"]')
    expect(tabs).to_have_count(len(views_before) + 1)  # a new tab, beside any other test's pipeline
    (tab_id,) = {tabs.nth(i).get_attribute("id") for i in range(tabs.count())} - views_before
    assert tab_id
    view = page.locator(f"#{tab_id} .jp-GPUSched-pipeline")
    expect(view).to_be_visible()
    steps = view.locator(".jp-GPUSched-pipelineStep")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("slow")
    expect(steps.nth(1)).to_contain_text("fails")
    # slow.ipynb sleeps 120 s: its dependant waits for it
    expect(steps.nth(1)).to_have_attribute("data-state", "WAITING")
    expect(steps.nth(1)).to_contain_text("after step 0")
    pipeline = lab.api("GET", f"pipelines/{tab_id.removeprefix('gpusched-pipeline-')}").json()
    first = pipeline["steps"][0]["id"]
    try:
        assert pipeline["edges"] == [[0, 1]]
        assert [s["notebook"] for s in pipeline["steps"]] == ["slow.ipynb", "fails.ipynb"]
        view.screenshot(path=str(ARTIFACTS / "pipeline-view-from-dialog-light.png"))
        page.screenshot(path=str(ARTIFACTS / "lab-pipeline-from-dialog-light.png"))
    finally:
        lab.api("DELETE", f"jobs/{first}")


def test_schedule_from_the_form_then_pause_it(page: Page, lab: Lab):
    open_panel(page)
    form = page.locator(FORM)
    form.get_by_label("Notebook").fill("train.ipynb")
    form.get_by_label("GPUs").fill("1")
    page.locator(PANEL).get_by_role("button", name="Schedule…").click()
    page.get_by_label("Cron (min hour day month weekday)").fill("0 2 * * *")
    page.get_by_label("Time zone").fill("Europe/Berlin")
    preview = page.locator(".jp-GPUSched-schedulePreview")
    expect(preview).to_contain_text("At 02:00 AM (Europe/Berlin time), next: ")
    form_audit = axe_violations(page, PANEL)  # WCAG 2.1 A/AA, the schedule form open
    assert not form_audit, form_audit
    page.get_by_role("button", name="Create schedule").click()
    row = page.locator(f"{PANEL} li.jp-GPUSched-scheduleRow")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("train.ipynb")
    expect(row).to_contain_text("0 2 * * *")
    expect(row).to_contain_text("Next: ")
    sid = row.get_attribute("data-schedule-id")
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-schedules-light.png"))
    row.get_by_role("button", name="Pause").click()
    expect(row).to_contain_text("Paused")
    panel_audit = axe_violations(page, PANEL)  # the schedule rows, running and paused
    assert not panel_audit, panel_audit
    assert lab.api("GET", f"schedules/{sid}").json()["paused"] is True
    page.locator(PANEL).screenshot(path=str(ARTIFACTS / "panel-schedules-paused-light.png"))
    lab.api("DELETE", f"schedules/{sid}")


def test_the_panel_and_its_dialogs_pass_an_accessibility_audit_light_and_dark(page: Page, lab: Lab):
    """axe-core's WCAG 2.1 A/AA rules on what the extension draws (it runs last: the panel lists the jobs, the
    pipeline views and output viewers the tests above opened), in both themes: none may fail."""
    open_panel(page)
    found: dict[str, list[str]] = {}
    try:
        for theme in ("JupyterLab Light", "JupyterLab Dark"):
            set_theme(page, theme)
            found[f"{theme}: panel"] = axe_violations(page, PANEL)
            for tab in page.locator('.jp-MainAreaWidget[id^="gpusched-"]').all():
                tab_id = tab.get_attribute("id")
                page.evaluate(f"window.jupyterapp.shell.activateById('{tab_id}')")
                found[f"{theme}: {tab_id}"] = axe_violations(page, f"#{tab_id}")
            page.locator(PANEL).get_by_role("button", name="Run a pipeline…").click()
            expect(page.get_by_role("dialog")).to_contain_text("Run a pipeline")
            found[f"{theme}: pipeline dialog"] = axe_violations(page, ".jp-Dialog")
            page.keyboard.press("Escape")
            expect(page.get_by_role("dialog")).to_have_count(0)
    finally:
        set_theme(page, "JupyterLab Light")
    failed = [f"{where}: {line}" for where, lines in found.items() for line in lines]
    assert not failed, "WCAG 2.1 A/AA rules failed:\n" + "\n".join(failed)
