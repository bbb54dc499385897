"""Copy buttons on messages: a question as typed, an answer as its markdown source."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e


def test_copy_buttons_copy_the_question_and_the_answers_markdown(
    chat_page: Page, llm: ScriptedLLM, alice_context: BrowserContext, app_server: str
) -> None:
    alice_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_server)
    answer = "## Result\n\n**51**, from `17*3`:\n\n- seventeen\n- times three\n"
    llm.script({"chunks": [answer[:12], answer[12:]]})
    new_conversation(chat_page)
    question = "What is 17*3?\nShow your working."
    send(chat_page, question)
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    clipboard = "() => navigator.clipboard.readText()"

    copy_answer = chat_page.locator(f"#footer-{run_id}").get_by_role(
        "button", name="Copy the answer (markdown)"
    )
    copy_answer.click()
    expect(copy_answer).to_have_class(re.compile(r"\bcopied\b"))
    assert chat_page.evaluate(clipboard) == answer

    copy_question = chat_page.locator(".msg.user").last.get_by_role(
        "button", name="Copy the message"
    )
    copy_question.click()
    expect(copy_question).to_have_class(re.compile(r"\bcopied\b"))
    assert chat_page.evaluate(clipboard) == question

    chat_page.reload()  # the same after a page load
    copy_answer.click()
    assert chat_page.evaluate(clipboard) == answer


def test_a_new_api_tokens_copy_button_copies_it(
    chat_page: Page, alice_context: BrowserContext, app_server: str
) -> None:
    alice_context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_server)
    chat_page.goto("/settings/tokens/")
    chat_page.get_by_label("Name").fill("copied token")
    chat_page.get_by_role("button", name="Create token").click()
    token = chat_page.get_by_label("New API token").input_value()
    assert len(token) > 20
    chat_page.wait_for_load_state()  # the deferred behaviours.js (the Copy handler) has run
    copy = chat_page.locator("#new-token").get_by_role("button", name="Copy")
    copy.click()
    expect(copy).to_have_class(re.compile(r"\bcopied\b"))
    assert chat_page.evaluate("() => navigator.clipboard.readText()") == token
