"""Edit a question, regenerate an answer, retry a stopped one, switch between versions."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e


def user_texts(page: Page) -> list[str]:
    return page.locator("#messages .msg.user:not(.inject) .content").all_inner_texts()


def test_edit_a_question_then_switch_between_its_versions(chat_page: Page, llm: ScriptedLLM):
    llm.script("Paris.", "Madrid.", "Rome.")
    new_conversation(chat_page)
    send(chat_page, "Capital of France?")
    wait_finished(chat_page, latest_run(chat_page))
    send(chat_page, "And of Spain?")
    expect(chat_page.locator("#messages section.run")).to_have_count(2)
    spain_run = latest_run(chat_page)
    wait_finished(chat_page, spain_run)
    expect(chat_page.locator(f"#answer-{spain_run}")).to_contain_text("Madrid.")

    question = chat_page.locator("#messages .msg.user").last
    question.get_by_role("button", name="Edit the message").click()
    box = chat_page.get_by_role("textbox", name="Edit the message")
    expect(box).to_have_value("And of Spain?")
    box.fill("And of Italy?")
    chat_page.locator("form.editing").get_by_role("button", name="Send").click()

    expect(chat_page.locator(f"#run-{spain_run}")).to_have_count(0)
    italy_run = latest_run(chat_page)
    assert italy_run != spain_run
    wait_finished(chat_page, italy_run)
    expect(chat_page.locator(f"#answer-{italy_run}")).to_contain_text("Rome.")
    assert user_texts(chat_page) == ["Capital of France?", "And of Italy?"]
    # The model read the first exchange and the edited question, not the original one.
    last_request = [m["content"] for m in llm.requests()[-1]["messages"] if m["role"] != "system"]
    assert "And of Spain?" not in " ".join(last_request)
    assert "Paris." in " ".join(last_request)
    switch = chat_page.locator("#messages .msg.user").last.locator(".branch-switch")
    expect(switch.locator(".branch-position")).to_have_text("2/2")

    switch.get_by_role("button", name="Previous version").click()
    expect(chat_page.locator(f"#answer-{spain_run}")).to_contain_text("Madrid.")
    expect(chat_page.locator(f"#answer-{italy_run}")).to_have_count(0)
    assert user_texts(chat_page) == ["Capital of France?", "And of Spain?"]
    chat_page.reload()  # the selected version is kept
    expect(chat_page.locator(f"#answer-{spain_run}")).to_contain_text("Madrid.")
    expect(chat_page.locator(".branch-position")).to_have_text("1/2")


def test_regenerate_an_answer_and_switch_back(chat_page: Page, llm: ScriptedLLM):
    llm.script("First joke.", "Second joke.")
    new_conversation(chat_page)
    send(chat_page, "Tell me a joke")
    first = latest_run(chat_page)
    wait_finished(chat_page, first)

    chat_page.locator(f"#footer-{first}").get_by_role(
        "button", name="Regenerate the answer"
    ).click()

    expect(chat_page.locator(f"#answer-{first}")).to_have_count(0)
    second = latest_run(chat_page)
    wait_finished(chat_page, second)
    expect(chat_page.locator(f"#answer-{second}")).to_contain_text("Second joke.")
    assert user_texts(chat_page) == ["Tell me a joke"]
    nav = chat_page.locator(f"#answer-nav-{second}")
    expect(nav.locator(".branch-position")).to_have_text("2/2")
    requests = llm.requests()
    assert requests[0]["messages"][1:] == requests[1]["messages"][1:]  # the same history

    nav.get_by_role("button", name="Previous version").click()
    expect(chat_page.locator(f"#answer-{first}")).to_contain_text("First joke.")
    expect(chat_page.locator(f"#answer-nav-{first} .branch-position")).to_have_text("1/2")


def test_retry_a_stopped_answer_keeps_the_question(chat_page: Page, llm: ScriptedLLM):
    llm.script({"content": "Too late.", "delay": 60}, "Here it is.")
    new_conversation(chat_page)
    send(chat_page, "Take your time")
    stopped = latest_run(chat_page)
    status = chat_page.locator(f"#status-{stopped}")
    expect(status.locator("button.stop")).to_be_visible()
    status.locator("button.stop").click()
    expect(status).to_contain_text("Stopped.")

    status.get_by_role("button", name="Retry").click()

    # The retry is a sibling: the timeline now shows it in place of the stopped answer.
    expect(chat_page.locator(f"#run-{stopped}")).to_have_count(0)
    retry = latest_run(chat_page)
    assert retry != stopped
    wait_finished(chat_page, retry)
    expect(chat_page.locator(f"#answer-{retry}")).to_contain_text("Here it is.")
    assert user_texts(chat_page) == ["Take your time"]
    expect(chat_page.locator(f"#answer-nav-{retry} .branch-position")).to_have_text("2/2")
    expect(chat_page.locator("#form-error")).to_have_text(re.compile(r"^\s*$"))
