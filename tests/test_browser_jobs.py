"""The main-area Jobs view end to end: a real `jupyter lab` holding 2,500 ended jobs (written into its
store before it starts: the cheapest real way), Debian's Chromium driven by Playwright.

Open the view from the panel, the palette and the status bar; sort by a column (aria-sort); filter by
state, tenant and text; page through all 2,500 jobs (only one page in the DOM, no long task); follow a
live job's row as it changes state without a reload; open its page with the keyboard (history,
parameters, streaming log, output, download); a queued job's ETA. The table is compared against
committed screenshots (tests/screenshots/, light and dark; GPUSCHED_UPDATE_SCREENSHOTS=1 rewrites them),
and every test fails on an error in the browser console.
"""

from __future__ import annotations

import pytest

from jupyter_gpusched.testing.browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    BrowserErrors,
    axe_violations,
    check_screenshot,
    jp_asyncio_loop,  # noqa: F401  (pytest-jupyter's loop, replaced)
    serve_this_build,
    set_theme,
)
from jupyter_gpusched.testing.jupyter import Lab
from jupyter_gpusched.testing.stores import prefill_table_jobs

if not CHROMIUM.exists():
    pytest.skip(
        f"browser tests need Chromium at {CHROMIUM}: run `bash scripts/ci-browser-deps.sh` (apt-get install chromium)",
        allow_module_level=True,
    )

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402  (only once Chromium is known to be there)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

N_JOBS = 2500
VIEW = ".jp-GPUSched-jobsView"
TABLE = f"{VIEW} .jp-GPUSched-jobsTable"
PAGER = f"{VIEW} .jp-GPUSched-pageInfo"
ERRORS = BrowserErrors()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("lab-jobs")
    server = Lab(base)
    serve_this_build(server, base)
    server.counts = prefill_table_jobs(server.data, N_JOBS)
    server.start()
    yield server
    server.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-jobs-lab.log").write_text(server.log_tail(200_000))


@pytest.fixture(scope="module")
def page(lab):
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        # Fixed viewport, locale and time zone: the table's dates and layout are the same every run.
        context = browser.new_context(
            viewport={"width": 1400, "height": 900}, locale="en-US", timezone_id="UTC", accept_downloads=True
        )
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        pg.on("console", ERRORS.console)
        pg.on("pageerror", ERRORS.page_error)
        pg.goto(f"{lab.url}lab?token={lab.token}")
        pg.wait_for_selector('.jp-SideBar [data-id="gpusched-panel"]', timeout=60_000)
        yield pg
        browser.close()


@pytest.fixture(autouse=True)
def no_console_errors(request, page):
    yield
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-end.png"))
    page.wait_for_timeout(300)  # a last refresh's errors arrive
    unexpected = ERRORS.take_unexpected()
    assert not unexpected, "errors in the browser console:\n" + "\n".join(unexpected)


def pager_text(page: Page) -> str:
    return page.locator(PAGER).inner_text()


def rows(page: Page):
    return page.locator(f"{TABLE} tbody tr")


def first_cell(page: Page, column: str) -> str:
    return rows(page).first.locator(f'td[data-column="{column}"]').inner_text()


def table_screenshot(page: Page, name: str) -> None:
    """The view's table region as it is now, compared against the committed reference."""
    page.mouse.move(0, 0)  # no hover highlight
    # No row still flagged as changed by the previous fetch (a filter just cleared): the next fetch, which
    # finds nothing new, removes the flag; a slow machine may screenshot before it comes.
    expect(page.locator(f"{TABLE} .jp-GPUSched-rowChanged")).to_have_count(0, timeout=30_000)
    path = ARTIFACTS / f"{name}.png"
    page.locator(VIEW).screenshot(path=str(path), animations="disabled", caret="hide")
    check_screenshot(path, name)


def test_open_sort_filter_and_page_through_2500_jobs(page: Page, lab: Lab):
    # from the panel's button
    page.click('.jp-SideBar [data-id="gpusched-panel"]')
    page.get_by_role("button", name="Open Jobs view").click()
    expect(page.locator(PAGER)).to_have_text(f"1–50 of {N_JOBS} · page 1 of 50", timeout=30_000)
    page.click('.jp-SideBar [data-id="gpusched-panel"]')  # close the sidebar: the table's full width
    expect(rows(page)).to_have_count(50)
    # newest first by default; the owner column (the single user is an admin)
    expect(page.locator(f'{TABLE} th[data-column="submitted"]')).to_have_attribute("aria-sort", "descending")
    assert rows(page).first.get_attribute("data-job-id") == f"tbl{N_JOBS - 1:06d}"
    expect(page.locator(f'{TABLE} th[data-column="owner"]')).to_be_visible()
    table_screenshot(page, "jobs-view-light")

    # sort by name (A to Z, then Z to A)
    name_header = page.locator(f'{TABLE} th[data-column="name"]')
    name_header.get_by_role("button").click()
    expect(name_header).to_have_attribute("aria-sort", "ascending")
    expect(rows(page).first.locator('td[data-column="name"]')).to_have_text("alpha.ipynb")
    name_header.get_by_role("button").click()
    expect(name_header).to_have_attribute("aria-sort", "descending")
    expect(rows(page).first.locator('td[data-column="name"]')).to_have_text("gamma.ipynb")
    expect(page.locator(f'{TABLE} th[data-column="submitted"]')).to_have_attribute("aria-sort", "none")
    # by GPUs, most first
    page.locator(f'{TABLE} th[data-column="gpus"]').get_by_role("button").click()
    expect(rows(page).first.locator('td[data-column="gpus"]')).to_have_text("4")

    # page through every page: one page of rows in the DOM at a time, the page never stalls
    page.evaluate(
        """() => { window.__longTasks = [];
        new PerformanceObserver(l => l.getEntries().forEach(e => window.__longTasks.push(e.duration)))
          .observe({type: 'longtask', buffered: false}); }"""
    )
    seen = set()
    next_button = page.get_by_role("button", name="Next ›")
    for number in range(1, 51):
        expect(page.locator(PAGER)).to_contain_text(f"page {number} of 50")
        # the rows of that page have arrived (aria-rowindex counts the header as row 1)
        expect(rows(page).first).to_have_attribute("aria-rowindex", str((number - 1) * 50 + 2))
        expect(rows(page)).to_have_count(50)
        seen.update(r.get_attribute("data-job-id") for r in rows(page).all())
        if number < 50:
            next_button.click()
    expect(next_button).to_be_disabled()
    assert len(seen) == N_JOBS, f"{len(seen)} distinct jobs over 50 pages"
    long_tasks = page.evaluate("window.__longTasks")
    assert max(long_tasks, default=0) < 1500, f"main thread blocked while paging: {long_tasks} ms"

    # filters: state, tenant, text; each starts again on page 1
    state = page.get_by_label("Filter by state")
    state.select_option("FAILED")
    expect(page.locator(PAGER)).to_contain_text(f"of {lab.counts['FAILED']} · page 1")
    expect(rows(page).first).to_have_attribute("data-state", "FAILED")
    page.get_by_label("Filter by tenant").select_option("team-a")
    both = sum(1 for i in range(N_JOBS) if i % 5 == 2 and i % 3 == 1)
    expect(page.locator(PAGER)).to_contain_text(f"of {both} · page 1")
    state.select_option("")
    page.get_by_label("Filter by tenant").select_option("")
    page.get_by_label("Search jobs by name, id, owner, tenant or reason").fill("epsilon")
    expect(page.locator(PAGER)).to_contain_text(f"of {N_JOBS // 5} ·")
    page.get_by_label("Search jobs by name, id, owner, tenant or reason").fill("tbl000042")
    expect(page.locator(PAGER)).to_have_text("1–1 of 1 · page 1 of 1")
    expect(page.locator(f"{TABLE} tbody tr")).to_have_count(1)
    page.get_by_label("Search jobs by name, id, owner, tenant or reason").fill("")
    expect(page.locator(PAGER)).to_contain_text(f"of {N_JOBS} ·")

    # dark theme, same data and order as the light reference
    page.locator(f'{TABLE} th[data-column="submitted"]').get_by_role("button").click()
    expect(page.locator(f'{TABLE} th[data-column="submitted"]')).to_have_attribute("aria-sort", "descending")
    expect(page.locator(PAGER)).to_have_text(f"1–50 of {N_JOBS} · page 1 of 50")
    light_audit = axe_violations(page, VIEW)  # WCAG 2.1 A/AA, a page of 50 rows of every state
    set_theme(page, "JupyterLab Dark")
    try:
        table_screenshot(page, "jobs-view-dark")
        dark_audit = axe_violations(page, VIEW)
    finally:
        set_theme(page, "JupyterLab Light")
    assert not light_audit and not dark_audit, {"light": light_audit, "dark": dark_audit}


def test_live_update_eta_and_job_page(page: Page, lab: Lab):
    # the status bar opens the view; a text filter keeps only this test's jobs in it
    page.locator(".jp-GPUSched-status").click()
    expect(page.locator(PAGER)).to_contain_text("of ", timeout=30_000)
    page.get_by_label("Search jobs by name, id, owner, tenant or reason").fill("train.ipynb")
    expect(page.locator(PAGER)).to_have_text("No jobs")

    # both GPUs busy with a job that has a runtime limit: the queued one gets an estimate
    blocker = lab.api("POST", "jobs", {"notebook": "blocker.ipynb", "gpus": 2, "max_runtime": 1200}).json()
    lab.wait_for_state(blocker["id"], {"RUNNING"})
    job = lab.api("POST", "jobs", {"notebook": "train.ipynb", "gpus": 1, "parameters": {"lr": 0.25}}).json()
    row = page.locator(f'{TABLE} tbody tr[data-job-id="{job["id"]}"]')
    expect(row).to_have_attribute("data-state", "QUEUED", timeout=20_000)  # appeared without a reload
    expect(row.locator('td[data-column="eta"]')).to_contain_text("#1 in line · starts in about", timeout=20_000)

    # keyboard: focus the row, Enter opens the job's page
    row.focus()
    page.keyboard.press("Enter")
    detail = page.locator(f"#gpusched-job-page-{job['id']}")
    expect(detail).to_be_visible()
    expect(detail.locator(".jp-GPUSched-eta")).to_contain_text("starts in about")
    expect(detail.get_by_role("region", name="History")).to_contain_text("QUEUED")
    expect(detail.get_by_role("region", name="Settings")).to_contain_text("lr")

    assert lab.api("DELETE", f"jobs/{blocker['id']}").status_code == 200  # now ours runs
    expect(detail.locator(".jp-GPUSched-jobTitle [data-state]")).to_have_attribute(
        "data-state", "SUCCEEDED", timeout=90_000
    )
    expect(detail.locator(".jp-GPUSched-logText")).to_contain_text("step 2 lr=0.25", timeout=30_000)
    history = detail.get_by_role("region", name="History")
    for state in ("QUEUED", "ADMITTED", "RUNNING", "SUCCEEDED"):
        expect(history).to_contain_text(state)
    page.screenshot(path=str(ARTIFACTS / "job-page-light.png"))
    light_audit = axe_violations(page, f"#gpusched-job-page-{job['id']}")  # WCAG 2.1 A/AA
    assert not light_audit, light_audit

    with page.expect_download() as download:
        detail.get_by_role("button", name="Download output").click()
    assert download.value.suggested_filename == f"train.{job['id']}.ipynb"
    detail.get_by_role("button", name="Output", exact=True).click()
    expect(page.locator(f"#gpusched-output-{job['id']}")).to_be_visible()

    # back in the table, the row followed the job to its end (live, no reload)
    page.evaluate("window.jupyterapp.commands.execute('gpusched:open-jobs-view')")
    expect(row).to_have_attribute("data-state", "SUCCEEDED", timeout=20_000)
    expect(row.locator('td[data-column="eta"]')).to_have_text("")
    set_theme(page, "JupyterLab Dark")
    try:
        page.evaluate(f"window.jupyterapp.commands.execute('gpusched:open-job-detail', {{job: '{job['id']}'}})")
        expect(detail).to_be_visible()
        page.screenshot(path=str(ARTIFACTS / "job-page-dark.png"))
        dark_audit = axe_violations(page, f"#gpusched-job-page-{job['id']}")
        assert not dark_audit, dark_audit
    finally:
        set_theme(page, "JupyterLab Light")


def test_queued_job_without_estimate_says_why(page: Page, lab: Lab):
    page.evaluate("window.jupyterapp.commands.execute('gpusched:open-jobs-view')")
    search = page.get_by_label("Search jobs by name, id, owner, tenant or reason")
    search.fill("other.ipynb")
    blocker = lab.api("POST", "jobs", {"notebook": "blocker.ipynb", "gpus": 2}).json()  # no runtime limit
    lab.wait_for_state(blocker["id"], {"RUNNING"})
    job = lab.api("POST", "jobs", {"notebook": "other.ipynb", "gpus": 1}).json()
    row = page.locator(f'{TABLE} tbody tr[data-job-id="{job["id"]}"]')
    expect(row.locator('td[data-column="eta"]')).to_have_text(
        "#1 in line · no estimate: no runtime limits on the running jobs", timeout=20_000
    )
    for job_id in (job["id"], blocker["id"]):
        lab.api("DELETE", f"jobs/{job_id}")
