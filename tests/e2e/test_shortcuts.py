"""Keyboard shortcuts (static/js/shortcuts.js) as a user presses them, in real Chromium."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send

pytestmark = pytest.mark.e2e


def test_the_shortcuts_list_opens_with_question_mark_ctrl_slash_and_the_sidebar_link(
    chat_page: Page,
) -> None:
    chat_page.goto("/")
    dialog = chat_page.get_by_role("dialog", name="Keyboard shortcuts")
    chat_page.locator("#sidebar h2").click()  # not in a text box: "?" is a shortcut there

    chat_page.keyboard.press("?")
    expect(dialog).to_be_visible()
    for action in ("New chat", "Focus the message box", "Stop the answer being written"):
        expect(dialog).to_contain_text(action)
    chat_page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # The message box has the focus on a chat page: "?" there, while it is empty, opens
    # the list too (issue 47); once a message is being typed, "?" is typed.
    box = chat_page.locator("#composer textarea")
    box.focus()
    chat_page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(box).to_have_value("")
    chat_page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    box.focus()
    chat_page.keyboard.type("Why")
    chat_page.keyboard.press("?")
    expect(dialog).to_be_hidden()
    expect(box).to_have_value("Why?")
    chat_page.keyboard.press("Control+/")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()

    chat_page.get_by_role("button", name="Keyboard shortcuts").click()
    expect(dialog).to_be_visible()


def test_new_chat_focus_and_sidebar_shortcuts(chat_page: Page) -> None:
    conversation_id = new_conversation(chat_page)
    chat_page.evaluate("() => { window.__samePage = true; }")

    chat_page.keyboard.press("Control+Shift+O")
    expect(chat_page).to_have_url(re.compile(r"/c/new/$"))
    expect(chat_page.locator("#conversation-title")).to_have_count(0)
    box = chat_page.locator("#composer textarea")
    expect(box).to_be_visible()
    assert chat_page.evaluate("() => window.__samePage === true")

    chat_page.get_by_label("Search conversations").focus()
    chat_page.keyboard.press("Shift+Escape")
    expect(box).to_be_focused()

    sidebar = chat_page.locator("#sidebar")
    chat_page.keyboard.press("Control+Shift+S")
    expect(sidebar).to_be_hidden()
    chat_page.keyboard.press("Control+Shift+S")
    expect(sidebar).to_be_visible()
    expect(chat_page.locator(f"#conversation-{conversation_id}")).to_be_visible()


def test_escape_stops_the_running_answer(chat_page: Page, llm: ScriptedLLM) -> None:
    chunks = [f"Part {number} of a long answer. " for number in range(1, 40)]
    llm.script({"chunks": chunks, "chunk_delay": 0.3})
    new_conversation(chat_page)
    send(chat_page, "Tell me a long story")
    run_id = latest_run(chat_page)
    status = chat_page.locator(f"#status-{run_id}")
    expect(chat_page.locator(f"#answer-{run_id}")).to_contain_text("Part 2 ")
    expect(status.locator("button.stop")).to_be_visible()

    chat_page.keyboard.press("Escape")
    expect(status).to_contain_text("Stopped.")
    expect(status.locator("button.stop")).to_have_count(0)
