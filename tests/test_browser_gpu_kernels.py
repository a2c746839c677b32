"""GPU kernels in a real JupyterLab, driven by Debian's Chromium: pick "Python 3 (1 GPU)" in the launcher
while both GPUs are held, see "waiting for a GPU: #1 in line", then (a GPU given back) run
`import os; os.environ["CUDA_VISIBLE_DEVICES"]` in it. Screenshots go to test-artifacts/."""

from __future__ import annotations

import json
import os

import pytest
import requests
from playwright.sync_api import expect, sync_playwright
from test_browser import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, serve_this_build  # skips without Chromium

from jupyter_gpusched.cli.kernelspec import install
from jupyter_gpusched.testing.browser import BrowserErrors
from jupyter_gpusched.testing.gpukernels import ensure_provisioner_entry_point
from jupyter_gpusched.testing.jupyter import Lab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    import asyncio

    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def kernels_api(lab: Lab, method: str, *path: str, body: dict | None = None) -> requests.Response:
    r = requests.request(
        method,
        lab.url + "/".join(("api", "kernels", *path)),
        data=json.dumps(body) if body is not None else None,
        headers={"Authorization": f"token {lab.token}"},
        timeout=60,
    )
    r.raise_for_status()
    return r


def test_pick_a_gpu_kernel_wait_then_run(tmp_path):
    server = Lab(tmp_path)
    serve_this_build(server, tmp_path)
    jupyter_path = tmp_path / "jupyter-path"
    kernels_dir = jupyter_path / "kernels"
    kernels_dir.mkdir(parents=True, exist_ok=True)
    install(1, prefix=str(tmp_path / "prefix"))
    os.replace(tmp_path / "prefix" / "share" / "jupyter" / "kernels" / "python3-gpu1", kernels_dir / "python3-gpu1")
    server.env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(jupyter_path), server.env.get("JUPYTER_PATH")) if p)
    extra = ensure_provisioner_entry_point(tmp_path / "entry-points")
    if extra is not None:
        server.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(extra), os.environ.get("PYTHONPATH")) if p)
    server.start()
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        holders = [kernels_api(server, "POST", body={"name": "python3-gpu1"}).json()["id"] for _ in range(2)]
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.set_default_timeout(60_000)
            errors = BrowserErrors()  # console errors too, as every browser test checks
            page.on("console", errors.console)
            page.on("pageerror", errors.page_error)
            page.goto(f"{server.url}lab?token={server.token}")
            card = page.locator('.jp-LauncherCard[data-category="Notebook"]', has_text="Python 3 (1 GPU)")
            card.click()
            waiting = page.get_by_text("waiting for a GPU: #1 in line")
            expect(waiting.first).to_be_visible()
            page.screenshot(path=str(ARTIFACTS / "gpu-kernel-waiting.png"))

            kernels_api(server, "DELETE", holders[0])  # one GPU given back: the waiting kernel starts
            expect(waiting).to_have_count(0)
            expect(page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").first).to_be_attached()
            cell = page.locator(".jp-Cell .cm-content").first
            cell.click()
            page.keyboard.type('import os; os.environ["CUDA_VISIBLE_DEVICES"]')
            page.keyboard.press("Shift+Enter")
            output = page.locator(".jp-OutputArea-output").first
            expect(output).to_contain_text("'0'")  # the GPU the first holder gave back
            page.screenshot(path=str(ARTIFACTS / "gpu-kernel-running.png"))
            browser.close()
        assert not errors.unexpected(), errors.unexpected()
    finally:
        server.stop()
        (ARTIFACTS / "browser-gpu-kernels.log").write_text(server.log_tail(200_000))
