"""The budget views in a real JupyterLab (Debian's Chromium, Playwright): a tenant with a hard money
budget it has already spent shows a red "used / budget this period" bar above the form and a toast,
and the form says what a job would cost and that it will wait. Screenshots of the panel in the light and dark
themes go to test-artifacts/ (budget-panel-light.png, budget-panel-dark.png)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect, sync_playwright  # noqa: E402,I001  (test_browser skips without Chromium)
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    FORM,
    PANEL,
    jp_asyncio_loop,
    serve_this_build,
)

from jupyter_gpusched.testing.browser import axe_violations, set_theme
from jupyter_gpusched.testing.jupyter import Lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
__all__ = ["jp_asyncio_loop"]  # its fixture: Playwright's sync API owns this thread's loop

# The computed colour of --jp-error-color1 in the current theme.
THEME_ERROR_COLOR = """() => {
  const probe = document.createElement('div');
  probe.style.background = 'var(--jp-error-color1)';
  document.body.appendChild(probe);
  const color = getComputedStyle(probe).backgroundColor;
  probe.remove();
  return color;
}"""
PRICE = 2.4
BUDGET = 0.005  # dollars: one 2-GPU job of a few seconds at $2.40 per GPU-hour spends more


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("lab-budgets")
    server = Lab(base)
    serve_this_build(server, base)
    config = {
        "GPUSched": {
            "tenants": {"default": {"quota": 2, "budget": {"money": BUDGET, "period": "month", "enforce": "hard"}}},
            "pools": {"local": {"price_per_gpu_hour": PRICE}},
        }
    }
    (base / "config").mkdir(parents=True, exist_ok=True)
    (base / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
    server.start()
    yield server
    server.stop()
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "browser-budgets-lab.log").write_text(server.log_tail(200_000))


def test_budget_bar_and_the_forms_cost_in_light_and_dark(lab: Lab):
    # spend the budget before the page loads (the panel reads the queues once a minute)
    spent = lab.api("POST", "jobs", {"notebook": "blocker.ipynb", "gpus": 2, "parameters": {"seconds": 3}}).json()
    lab.wait_for_state(spent["id"], {"SUCCEEDED"})
    bar = lab.api("GET", "queues").json()["queues"]["default"]["budget"]
    assert bar["state"] == "over" and bar["unit"] == "money", bar
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.set_default_timeout(30_000)
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
            page.goto(f"{lab.url}lab?token={lab.token}")
            page.click('.jp-SideBar [data-id="gpusched-panel"]', timeout=60_000)
            panel = page.locator(PANEL)
            budget = panel.locator('.jp-GPUSched-budget[data-tenant="default"]')
            expect(budget).to_have_attribute("data-state", "over")
            expect(budget).to_have_class(re.compile(r"\bjp-mod-over\b"))
            text = budget.locator(".jp-GPUSched-budgetText")
            expect(text).to_contain_text(re.compile(r"^default: \$0\.0\d / \$0\.01 this month \(\d+%\), resets 1 "))
            expect(text).to_contain_text("over budget: new jobs wait")
            # the 100% warning: a toast, once (the bar stays)
            expect(page.locator(".Toastify__toast", has_text="Budget: default: ")).to_have_count(1)
            meter = budget.get_by_role("meter")
            assert meter.get_attribute("aria-label") == text.inner_text()
            fill = budget.locator(".jp-GPUSched-budgetFill")
            red = fill.evaluate("n => getComputedStyle(n).backgroundColor")
            assert red == page.evaluate(THEME_ERROR_COLOR)  # Lab's error colour, not one of ours

            form = page.locator(FORM)
            form.get_by_label("GPUs").fill("2")
            form.get_by_label("Max runtime (minutes)").fill("120")
            expect(form.locator(".jp-GPUSched-costEstimate")).to_have_text("Cost: about 4 GPU-h, $9.60")
            expect(form.locator(".jp-GPUSched-budgetWait")).to_contain_text("default is over its budget for ")
            expect(form.locator(".jp-GPUSched-budgetWait")).to_contain_text(
                "this job will wait until the budget resets"
            )
            form.get_by_label("Max runtime (minutes)").fill("")
            expect(form.locator(".jp-GPUSched-costEstimate")).to_have_text("Cost: $4.80 per hour (no max runtime)")
            form.get_by_label("Max runtime (minutes)").fill("120")

            set_theme(page, "JupyterLab Light")
            panel.screenshot(path=str(ARTIFACTS / "budget-panel-light.png"))
            audits = {"light": axe_violations(page, PANEL)}  # WCAG 2.1 A/AA: the bar, the cost, the warning
            page.screenshot(path=str(ARTIFACTS / "budget-lab-light.png"))  # the toast, bottom right
            set_theme(page, "JupyterLab Dark")
            panel.screenshot(path=str(ARTIFACTS / "budget-panel-dark.png"))
            audits["dark"] = axe_violations(page, PANEL)
            assert not audits["light"] and not audits["dark"], audits
            assert fill.evaluate("n => getComputedStyle(n).backgroundColor") == page.evaluate(THEME_ERROR_COLOR)
            set_theme(page, "JupyterLab Light")
        finally:
            browser.close()
    assert not errors, errors
