"""The browser tests' screenshot comparison (testing/browser.py) tells a layout change from anti-aliasing."""

from __future__ import annotations

import pytest
from PIL import Image, ImageDraw

from jupyter_gpusched.testing import browser


def _table(path, row_height: int, shade: int = 0) -> None:
    image = Image.new("RGB", (200, 100), "white")
    draw = ImageDraw.Draw(image)
    for y in range(0, 100, row_height):
        draw.line([(0, y), (200, y)], fill=(shade, shade, shade))
    image.save(path)


def test_a_moved_layout_fails_and_faint_noise_passes(tmp_path, monkeypatch):
    monkeypatch.setattr(browser, "REFERENCES", tmp_path / "refs")
    monkeypatch.setattr(browser, "ARTIFACTS", tmp_path / "artifacts")
    monkeypatch.delenv(browser.UPDATE_ENV, raising=False)
    reference = tmp_path / "ref.png"
    _table(reference, 20)
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "table.png").write_bytes(reference.read_bytes())

    same_but_faint = tmp_path / "faint.png"
    _table(same_but_faint, 20, shade=10)  # anti-aliasing-sized differences
    browser.check_screenshot(same_but_faint, "table")

    moved = tmp_path / "moved.png"
    _table(moved, 22)  # rows 2 px taller: a layout regression
    assert browser.pixel_difference(moved, reference) > 0.005
    with pytest.raises(AssertionError, match="differ"):
        browser.check_screenshot(moved, "table")
    assert (tmp_path / "artifacts" / "table-diff.png").exists()

    monkeypatch.setenv(browser.UPDATE_ENV, "1")  # an intended change: the reference is rewritten
    browser.check_screenshot(moved, "table")
    assert browser.pixel_difference(moved, tmp_path / "refs" / "table.png") == 0
