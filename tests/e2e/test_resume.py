"""Continue a paused run in a real browser: the run pauses after three identical tool
errors, its footer offers Continue with an optional note, the keyboard reaches it, the
answer that follows goes on from the paused run's work, and a reload shows the same."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

QUESTION = "How many rows has the orders table?"
NOTE = "I unlocked the database, try again."
ANSWER = "The orders table has 1,204 rows."


def ghost_call(n: int) -> dict:
    """A call to a tool nobody has: the same error each time (the arguments differ)."""
    return {"tool_calls": [{"name": "count_rows", "arguments": {"attempt": n}}]}


def user_texts(page: Page) -> list[str]:
    return page.locator("#messages .msg.user:not(.inject) .content").all_inner_texts()


def test_continue_a_paused_run_with_a_note(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script(ghost_call(1), ghost_call(2), ghost_call(3), ANSWER)
    new_conversation(chat_page)
    send(chat_page, QUESTION)
    paused = latest_run(chat_page)
    wait_finished(chat_page, paused)
    expect(chat_page.locator(f"#answer-{paused}")).to_contain_text("I stopped because")
    footer = chat_page.locator(f"#footer-{paused}")

    note = footer.get_by_role("textbox", name="A note for the agent (optional)")
    note.fill(NOTE)
    note.press("Tab")  # the keyboard reaches Continue, and presses it
    button = footer.get_by_role("button", name="Continue")
    expect(button).to_be_focused()
    button.press("Enter")

    expect(chat_page.locator("#messages section.run")).to_have_count(2)
    resumed = latest_run(chat_page)
    assert resumed != paused
    wait_finished(chat_page, resumed)

    def shows_it_right() -> None:
        expect(chat_page.locator(f"#answer-{resumed}")).to_contain_text(ANSWER)
        expect(chat_page.locator(f"#resume-{resumed}")).to_contain_text(
            "Continues the paused run from where it stopped"
        )
        expect(chat_page.locator(f"#answer-{paused}")).to_contain_text("I stopped because")
        expect(chat_page.locator(f"#continue-{paused}")).to_have_count(0)  # it goes on below
        assert user_texts(chat_page) == [QUESTION, NOTE]
        expect(chat_page.locator("#form-error")).to_be_empty()

    shows_it_right()
    # The model went on from the paused run's calls and their results, then read the note.
    sent = llm.requests()[-1]["messages"]
    assert [m["role"] for m in sent[1:]] == ["user"] + ["assistant", "tool"] * 3 + ["user"]
    assert sent[-1]["content"] == NOTE

    chat_page.reload()
    shows_it_right()
