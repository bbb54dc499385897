"""Telling the agent how to behave (issue 46), as a user does it: instructions on the
Settings page reach the model in every chat's system prompt; a chat's Settings panel
changes its temperature, system prompt and tools, and the next request carries exactly
those; a value out of the model's range is refused beside its field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, wait_finished

pytestmark = pytest.mark.e2e


def csrf(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


@pytest.fixture
def clean_settings(chat_page: Page) -> Iterator[Page]:
    """alice's instructions are hers in every later test too: emptied afterwards."""
    yield chat_page
    chat_page.request.patch(
        "/api/me/settings", data={"instructions": ""}, headers={"X-CSRFToken": csrf(chat_page)}
    )


def ask(page: Page, text: str) -> None:
    page.locator("#composer textarea").fill(text)
    page.get_by_role("button", name="Send").click()
    wait_finished(page, latest_run(page))


def test_instructions_reach_the_model(clean_settings: Page, llm: ScriptedLLM) -> None:
    page = clean_settings
    page.goto("/settings/")
    page.get_by_label("What the agent should know about you").fill("Always answer in rhyme.")
    page.get_by_label("Time zone (the agent's clock)").select_option("Asia/Tokyo")
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Settings saved.")).to_be_visible()

    llm.script("Rhymes are fine, all the time.")
    new_conversation(page)
    ask(page, "How are you?")
    system = llm.requests()[-1]["messages"][0]["content"]
    assert "## The user's instructions\n\nAlways answer in rhyme." in system
    assert "(Asia/Tokyo, UTC+09:00)" in system


def test_a_chats_settings_panel_sets_what_the_model_gets(chat_page: Page, llm: ScriptedLLM) -> None:
    new_conversation(chat_page)
    chat_page.get_by_label("Settings of this chat").click()
    panel = chat_page.locator(".chat-settings-form")
    expect(panel).to_be_visible()
    panel.get_by_label("System prompt").fill("You are a terse sailor.")
    panel.get_by_label("Temperature").fill("9")
    panel.get_by_role("button", name="Save").click()
    expect(panel.locator(".field-error")).to_have_text(
        "temperature must be between 0 and 2 for scripted-model (got 9)."
    )
    expect(panel.get_by_label("System prompt")).to_have_value("You are a terse sailor.")

    panel.get_by_label("Temperature").fill("0.3")
    for box in panel.locator("input[name=tools]").all():
        if box.get_attribute("value") != "calculator":
            box.uncheck()
    panel.get_by_role("button", name="Save").click()
    expect(panel.get_by_role("status")).to_have_text("Saved: the next answer uses these settings.")

    llm.script("Aye.")
    chat_page.keyboard.press("Escape")
    ask(chat_page, "Status?")
    request = llm.requests()[-1]
    assert request["temperature"] == 0.3
    assert [tool["function"]["name"] for tool in request.get("tools", [])] == ["calculator"]
    assert (
        "## This conversation's instructions\n\nYou are a terse sailor."
        in (request["messages"][0]["content"])
    )
