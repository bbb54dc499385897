"""Nothing a user saw or typed is lost by a reload (issue 27): real Chromium, real daphne,
the scripted LLM server.

The LLM is held with ``after_release`` (or streams slowly) so each reload or Stop lands
at a known point of the run; every wait is a Playwright condition, never a sleep.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import (
    Screenshot,
    calculator_call,
    interrupts,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e

WAITING = "the agent will read it after its current step"  # a follow-up not taken in yet
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def pending_follow_up(page: Page, run_id: int) -> Locator:
    """The run's follow-ups shown in its block: waiting below its answer (sent), or in its
    steps (taken in by the agent)."""
    return page.locator(f"#run-{run_id} .msg.inject")


def visible_text(page: Page) -> str:
    """What the conversation shows, whitespace normalised (the markup may differ)."""
    return " ".join(page.locator("#messages").inner_text().split())


def held_run_with_follow_up(page: Page, follow_up: str) -> int:
    """A run whose first LLM call is held (``after_release="hold"``), with ``follow_up``
    sent while it waits; returns the run's id once the page shows the follow-up waiting."""
    new_conversation(page)
    send(page, "What is 17*3?")
    run_id = latest_run(page)
    expect(page.locator(f"#status-{run_id}")).to_contain_text("Thinking (step 1)")
    send(page, follow_up)
    waiting = pending_follow_up(page, run_id)
    expect(waiting).to_contain_text(follow_up)
    expect(waiting).to_contain_text(WAITING)
    return run_id


def test_a_stopped_answer_survives_a_reload(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    chunks = [f"Part {number} of a long answer. " for number in NUMBERS * 3]
    llm.script({"chunks": chunks, "chunk_delay": 0.3})
    new_conversation(chat_page)
    send(chat_page, "Tell me a long story")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    status = chat_page.locator(f"#status-{run_id}")
    expect(answer).to_contain_text("Part two")

    status.locator("button.stop").click()
    expect(status).to_contain_text("Stopped.")
    expect(answer).not_to_have_class(re.compile(r"\bstreaming\b"))
    partial = answer.inner_text().strip()
    assert "Part two" in partial, partial
    assert "".join(chunks).startswith(partial) and len(partial) < len("".join(chunks).strip())

    chat_page.reload()
    expect(answer).to_have_text(partial)
    expect(status).to_contain_text("Stopped.")
    expect(status).to_have_class(re.compile(r"\bcancelled\b"))
    expect(status.locator("button.retry")).to_be_visible()
    expect(status.locator("button.stop")).to_have_count(0)
    screenshot(chat_page)


def test_a_pending_follow_up_survives_a_reload(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    follow_up = "Also write the result in words, please."
    llm.script(
        calculator_call("17*3", after_release="hold"),
        {"chunks": ["17 × 3 = 51, ", "in words: ", "fifty-one."], "chunk_delay": 0.05},
    )
    run_id = held_run_with_follow_up(chat_page, follow_up)

    chat_page.reload()  # the agent has not taken the follow-up in: its LLM call is held
    waiting = pending_follow_up(chat_page, run_id)
    expect(waiting).to_contain_text(follow_up)
    expect(waiting).to_contain_text(WAITING)
    expect(waiting).to_have_count(1)

    llm.release("hold")
    expect(waiting).to_contain_text("delivered to the agent")
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#answer-{run_id}")).to_have_text("17 × 3 = 51, in words: fifty-one.")
    expect(waiting).to_have_count(1)
    expect(chat_page.locator("#messages section.run")).to_have_count(1)
    screenshot(chat_page)
    requests = llm.requests()
    assert len(requests) == 2, [r["messages"] for r in requests]
    (interrupt,) = interrupts(requests[1])
    assert follow_up in interrupt, interrupt


def test_a_stop_leaves_a_queued_follow_up_as_an_ordinary_message(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    follow_up = "And in Roman numerals?"
    llm.script(calculator_call("17*3", after_release="hold"))  # never released
    run_id = held_run_with_follow_up(chat_page, follow_up)
    status = chat_page.locator(f"#status-{run_id}")

    status.locator("button.stop").click()
    expect(status).to_contain_text("Stopped.")
    expect(pending_follow_up(chat_page, run_id)).to_have_count(0)
    expect(chat_page.get_by_text(WAITING)).to_have_count(0)
    typed = chat_page.locator("#messages .msg.user:not(.inject)")
    expect(typed).to_have_count(2)
    expect(typed.last.locator(".content")).to_have_text(follow_up)
    expect(typed.last.locator("button.pin")).to_have_attribute("aria-pressed", "false")
    live = visible_text(chat_page)

    chat_page.reload()
    expect(status).to_contain_text("Stopped.")
    expect(typed).to_have_count(2)
    expect(typed.last.locator(".content")).to_have_text(follow_up)
    expect(typed.last.locator("button.pin")).to_have_attribute("aria-pressed", "false")
    expect(pending_follow_up(chat_page, run_id)).to_have_count(0)
    assert visible_text(chat_page) == live
    screenshot(chat_page)
    assert len(llm.requests()) == 1
