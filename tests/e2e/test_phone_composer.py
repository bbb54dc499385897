"""The message box on a phone (issue 47): Enter makes a new line on a touch keyboard
(Send is the button), and the box grows as one types, up to a limit."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.e2e.conftest import log_in

pytestmark = pytest.mark.e2e

PHONE = {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True}


def test_enter_makes_a_new_line_and_the_box_grows(
    new_context: Callable[..., BrowserContext],
) -> None:
    context = new_context(**PHONE)
    try:
        page = context.new_page()
        log_in(page, "alice")
        page.goto("/c/new/")
        box = page.locator("#composer textarea")
        box.click()
        start = box.bounding_box()["height"]
        page.keyboard.type("first line")
        for n in range(2, 6):
            page.keyboard.press("Enter")
            page.keyboard.type(f"line {n}")
        expect(box).to_have_value("first line\nline 2\nline 3\nline 4\nline 5")
        assert page.url.endswith("/c/new/")  # nothing was sent
        grown = box.bounding_box()["height"]
        assert grown > start * 1.5, (start, grown)
        for n in range(6, 40):
            page.keyboard.press("Enter")
            page.keyboard.type(f"line {n}")
        assert box.bounding_box()["height"] <= 14 * 16 + 2  # max-height: 14rem
    finally:
        context.close()
