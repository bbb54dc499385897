"""A very long message in the browser (issue 47): collapsed under "Show all", which
expands it and then collapses it again, by mouse or keyboard."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e


def test_show_all_expands_a_long_message(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script("That is a lot of text.")
    new_conversation(chat_page)
    send(chat_page, "\n".join(f"line {n} of a pasted log" for n in range(400)))
    wait_finished(chat_page, latest_run(chat_page))
    chat_page.reload()
    message = chat_page.locator(".msg.user").last
    content = message.locator(".content")
    expect(content).to_have_class(re.compile(r"\bcollapsed\b"))
    assert content.bounding_box()["height"] < 400
    button = message.locator("button.expand-message")
    expect(button).to_have_text(re.compile(r"^Show all \(\d[\d,]* characters\)$"))
    button.click()
    expect(content).not_to_have_class(re.compile(r"\bcollapsed\b"))
    expect(button).to_have_attribute("aria-expanded", "true")
    expect(button).to_have_text("Show less")
    assert content.bounding_box()["height"] > 2000
    button.focus()
    chat_page.keyboard.press("Enter")
    expect(content).to_have_class(re.compile(r"\bcollapsed\b"))
