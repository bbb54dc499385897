"""A step's thinking streams into a collapsed "Thinking…" item; text the model wrote before
calling a tool shows at once, then moves out of the answer into the step's thought."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import (
    calculator_call,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e


def test_thinking_streams_collapsed_and_a_tool_steps_text_becomes_its_thought(
    chat_page: Page, llm: ScriptedLLM
) -> None:
    llm.script(
        calculator_call(
            "17*3",
            reasoning_content="The user wants a product, so I will use the calculator.",
            content="Let me compute that.",
            after_release="tool",
        ),
        {"chunks": ["17 × 3 ", "is **51**."], "chunk_delay": 0.1},
    )
    new_conversation(chat_page)
    send(chat_page, "What is 17*3?")
    run_id = latest_run(chat_page)
    steps = chat_page.locator(f"#steps-{run_id}")
    answer = chat_page.locator(f"#answer-{run_id}")
    llm.release("tool")

    thought = steps.locator("details.thinking").first
    expect(thought).to_contain_text("Thought")
    expect(thought).not_to_have_attribute("open", "")  # collapsed
    thought.locator("summary").click()
    expect(thought.locator(".thought-text")).to_have_text(
        "The user wants a product, so I will use the calculator.\n\nLet me compute that."
    )
    wait_finished(chat_page, run_id)
    expect(answer).to_have_text("17 × 3 is 51.")
    expect(answer.locator("strong")).to_have_text("51")
    expect(steps.locator(".tool-card")).to_have_count(1)

    chat_page.reload()  # the page rebuilt from the event log shows the same
    expect(steps.locator("details.thinking")).to_have_count(1)
    expect(steps.locator("details.thinking .thought-text")).to_contain_text("Let me compute that.")
    expect(answer).to_have_text("17 × 3 is 51.")
