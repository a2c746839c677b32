"""Browser-test support shared by tests/test_browser*.py: Debian's Chromium, this checkout's build of
the lab extension, the console-error check, and screenshots compared against committed references."""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = PROJECT_ROOT / "test-artifacts"
REFERENCES = PROJECT_ROOT / "tests" / "screenshots"
CHROMIUM = Path(os.environ.get("GPUSCHED_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--font-render-hinting=none",  # the same glyph shapes run to run (screenshots)
]
# This checkout's build of the lab extension (`jlpm build` / `pip install -e .` write it here).
BUILT_EXTENSION = PROJECT_ROOT / "jupyter_gpusched" / "labextension"
# Set to 1 to rewrite the references in tests/screenshots/ from this run (after an intended change).
UPDATE_ENV = "GPUSCHED_UPDATE_SCREENSHOTS"


@pytest.fixture(autouse=True)
def jp_asyncio_loop():
    """Playwright's sync API runs its own event loop in this thread: give pytest-jupyter's autouse
    fixture a loop of its own to close, instead of the running one (import it into a browser test)."""
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def serve_this_build(server, base: Path) -> None:
    """Put this checkout's build first on Lab's labextensions path (JUPYTER_PATH wins over the copy
    `pip install` made into the environment's share/, which may be another checkout's)."""
    if not (BUILT_EXTENSION / "package.json").exists():
        return  # an installed package without the source build: serve what is installed
    link = base / "jupyter-path" / "labextensions" / "jupyter-gpusched"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(BUILT_EXTENSION, target_is_directory=True)
    server.env["JUPYTER_PATH"] = os.pathsep.join(
        p for p in (str(base / "jupyter-path"), os.environ.get("JUPYTER_PATH")) if p
    )


@dataclass
class BrowserErrors:
    """Console messages of type error and uncaught page errors, per test; `allow` names the ones a test
    provokes on purpose (a refused request's status line), each with the URL it must come from."""

    seen: list[str] = field(default_factory=list)
    allowed: list[tuple[re.Pattern, str]] = field(default_factory=list)

    def console(self, message) -> None:
        if message.type == "error":
            url = (message.location or {}).get("url", "")
            self.seen.append(f"{message.text} [{url}]")

    def page_error(self, error) -> None:
        self.seen.append(f"uncaught: {error}")

    def allow(self, text: str, url_part: str) -> None:
        self.allowed.append((re.compile(re.escape(text)), url_part))

    def unexpected(self) -> list[str]:
        return [m for m in self.seen if not any(p.search(m) and f"{url}" in m for p, url in self.allowed)]

    def take_unexpected(self) -> list[str]:
        """The unexpected errors so far; starts the next test afresh."""
        out = self.unexpected()
        self.seen.clear()
        self.allowed.clear()
        return out


def pixel_difference(actual: Path, reference: Path, diff_out: Path | None = None) -> float:
    """The share of pixels (0..1) that differ by more than a little (anti-aliasing) in any channel; 1.0
    when the sizes differ. Writes the differing pixels in red over a faded `actual` to `diff_out`."""
    from PIL import Image, ImageChops

    a = Image.open(actual).convert("RGB")
    b = Image.open(reference).convert("RGB")
    if a.size != b.size:
        return 1.0
    delta = ImageChops.difference(a, b).convert("L").point(lambda v: 255 if v > 24 else 0)
    changed = delta.histogram()[255]
    if diff_out is not None and changed:
        overlay = Image.blend(a, Image.new("RGB", a.size, "white"), 0.7)
        overlay.paste(Image.new("RGB", a.size, "red"), mask=delta)
        overlay.save(diff_out)
    return changed / (a.size[0] * a.size[1])


def check_screenshot(actual: Path, name: str, tolerance: float = 0.005) -> None:
    """Fail when `actual` differs from tests/screenshots/<name>.png in more than `tolerance` of its
    pixels (a diff image goes to test-artifacts/). With GPUSCHED_UPDATE_SCREENSHOTS=1 the reference
    is rewritten from `actual` instead; a missing reference is written and fails, to be committed."""
    reference = REFERENCES / f"{name}.png"
    if os.environ.get(UPDATE_ENV) == "1" or not reference.exists():
        REFERENCES.mkdir(parents=True, exist_ok=True)
        missing = not reference.exists()
        reference.write_bytes(actual.read_bytes())
        if missing and os.environ.get(UPDATE_ENV) != "1":
            raise AssertionError(f"no reference screenshot {reference}: written from this run; commit it")
        return
    ARTIFACTS.mkdir(exist_ok=True)
    diff = ARTIFACTS / f"{name}-diff.png"
    share = pixel_difference(actual, reference, diff)
    assert share <= tolerance, (
        f"{name}: {share:.2%} of the pixels differ from {reference} (tolerance {tolerance:.2%}); see {diff}. "
        f"If the change is intended, rerun with {UPDATE_ENV}=1 and commit the new reference."
    )


def set_theme(page, theme: str) -> None:
    """Switch JupyterLab's theme (e.g. "JupyterLab Dark") and wait until it applies."""
    from playwright.sync_api import expect

    page.evaluate(f"window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})")
    expect(page.locator("body")).to_have_attribute("data-jp-theme-name", theme, timeout=20_000)
    page.wait_for_timeout(300)  # the theme's colours settle before anything reads them


AXE = PROJECT_ROOT / "labextension" / "node_modules" / "axe-core" / "axe.min.js"  # a dev dependency of the lab
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# What JupyterLab's own renderers draw inside our views keeps JupyterLab's colours, as in any notebook: the
# prompts, the syntax-highlighted source's tokens, rendered outputs (ANSI colours) and Markdown.
LAB_RENDERED = (".jp-InputPrompt", ".jp-GPUSched-source span", ".jp-OutputArea", ".jp-RenderedMarkdown")


def axe_violations(page, selector: str, exclude: Sequence[str] = LAB_RENDERED) -> list[str]:
    """axe-core's WCAG 2.1 A and AA rules on what `selector` holds (only that: JupyterLab's own chrome
    around it and, by default, its renderers inside it, `LAB_RENDERED`, are not ours to fix), one line per
    rule that fails, with up to three of its elements. A Voila page is all rendered output: `exclude=()`."""
    if not AXE.exists():
        raise AssertionError(f"{AXE} is missing: run `jlpm install` in labextension/ (axe-core is a dev dependency)")
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    # JupyterLab's root `.jp-ThemedContainer` is 0 px high with overflow hidden; its absolutely placed children
    # show, but axe takes them for clipped and skips every rule that needs visible text (colour contrast):
    # the audit lifts that overflow while it runs.
    return page.evaluate(
        """async ([selector, exclude, tags]) => {
            const roots = [...document.querySelectorAll('.jp-ThemedContainer')];
            const before = roots.map(n => n.style.overflow);
            roots.forEach(n => { n.style.overflow = 'visible'; });
            try {
                const context = {include: [selector], exclude: exclude.map(e => `${selector} ${e}`)};
                const result = await axe.run(context, {runOnly: {type: 'tag', values: tags}});
                return result.violations.map(v => `${v.impact} ${v.id}: ${v.help} (` +
                    v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' ' + (n.any[0] || {}).message).join('; ') + ')');
            } finally {
                roots.forEach((n, i) => { n.style.overflow = before[i]; });
            }
        }""",
        [selector, list(exclude), AXE_TAGS],
    )
