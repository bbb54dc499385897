"""Stop where the eye is (issue 47): while a run works, the composer's Send becomes Stop
and one line above the message box says what the agent is doing; the composer stays at
the bottom of the chat; a follow-up sent while the answer is being written shows below
it, labelled as the next question. At desktop (1280x900) and phone (390x844) sizes.

The LLM is held (``after_release``, ``pause_after`` with ``resume_on``) so each check
lands at a known point of the run. The status line's passing states (a tool that runs
in an instant) are recorded in the page by a MutationObserver, never raced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.e2e.conftest import ScriptedLLM, signed_in_page
from tests.e2e.test_chat_flows import (
    Screenshot,
    calculator_call,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e

SIZES: dict[str, dict[str, Any]] = {
    "desktop": {"viewport": {"width": 1280, "height": 900}},
    "phone": {"viewport": {"width": 390, "height": 844}, "has_touch": True, "is_mobile": True},
}
# A long answer: it pauses (``pause_after``) well past a screen's height.
LONG = [f"Paragraph {n}: " + "a sentence of the long answer, " * 8 + "\n\n" for n in range(1, 61)]
PAUSE_AT = 30
ANSWERS_NEXT = "sent · the agent will answer it after this answer"
READS_AFTER_STEP = "sent · the agent will read it after its current step"

# Every change of the composer appends "state:run:text" of its status line (when it differs).
COMPOSER_RECORDER = """() => {
  const seen = [];
  const note = () => {
    const el = document.getElementById("composer-status");
    const line = el ? `${el.dataset.state}:${el.dataset.run}:${el.textContent.trim()}` : "";
    if (seen[seen.length - 1] !== line) seen.push(line);
  };
  note();
  new MutationObserver(note).observe(document.getElementById("composer"), {
    childList: true, subtree: true, characterData: true, attributes: true,
  });
  window.__composerStates = seen;
}"""


@pytest.fixture(params=list(SIZES))
def sized_page(
    request: pytest.FixtureRequest, new_context: Callable[..., BrowserContext]
) -> Iterator[Page]:
    """A tab of alice's, at desktop or phone size."""
    with signed_in_page(new_context, "alice", **SIZES[request.param]) as page:
        yield page


@pytest.fixture
def window_shot(request: pytest.FixtureRequest, artifacts: Path) -> Callable[[Page], Path]:
    """``window_shot(page)``: what the window shows (the sticky composer where the user
    sees it), test-artifacts/e2e/<test>.window.png."""

    def take(page: Page) -> Path:
        name = re.sub(r"\W+", "_", request.node.name.removeprefix("test_"))
        path = artifacts / f"{name}.window.png"
        page.screenshot(path=str(path))
        return path

    return take


def composer_parts(page: Page) -> tuple[Locator, Locator, Locator]:
    """The composer's Send, Stop and status line."""
    composer = page.locator("#composer")
    return (
        composer.locator("button[type=submit]"),
        composer.locator("#composer-stop button.stop"),
        composer.locator("#composer-status"),
    )


def send_with_button(page: Page, text: str) -> None:
    """Type a message and press Send (on a phone, Enter makes a new line)."""
    page.locator("#composer textarea").fill(text)
    page.locator("#composer button[type=submit]").click()


def record_composer(page: Page) -> None:
    page.evaluate(COMPOSER_RECORDER)


def composer_states(page: Page) -> list[str]:
    return page.evaluate("() => window.__composerStates || []")


def assert_composer_on_screen(page: Page) -> float:
    """The composer lies inside the window; returns the gap below it (px)."""
    box = page.locator("#composer").bounding_box()
    height = page.viewport_size["height"]
    assert box is not None and box["y"] >= 0, box
    assert box["y"] + box["height"] <= height + 1, (box, height)
    return height - (box["y"] + box["height"])


def test_send_becomes_stop_says_what_the_agent_does_and_stop_brings_send_back(
    sized_page: Page, llm: ScriptedLLM, screenshot: Screenshot, window_shot: Callable[[Page], Path]
) -> None:
    page = sized_page
    follow_up = "And in Roman numerals?"
    llm.script(
        calculator_call("17*3", after_release="tool"),
        {"chunks": LONG, "chunk_delay": 0.01, "pause_after": PAUSE_AT, "resume_on": "rest"},
    )
    new_conversation(page)
    record_composer(page)
    send_button, stop, status = composer_parts(page)
    expect(send_button).to_be_visible()
    expect(stop).to_have_count(0)

    send_with_button(page, "What is 17*3? Explain at length.")
    run_id = latest_run(page)
    expect(stop).to_be_visible()
    expect(send_button).to_be_hidden()
    expect(status).to_have_text("Thinking (step 1)…")

    llm.release("tool")
    answer = page.locator(f"#answer-{run_id}")
    expect(answer).to_contain_text(f"Paragraph {PAUSE_AT}:")
    expect(status).to_have_text("Writing the answer…")
    texts = [line.split(":", 2)[2] for line in composer_states(page) if line.startswith("running:")]
    assert "Running calculator…" in texts, texts
    assert texts.index("Running calculator…") < texts.index("Writing the answer…"), texts
    # A long answer, still streaming: the composer and its Stop stay in the window.
    assert answer.bounding_box()["height"] > page.viewport_size["height"]
    assert_composer_on_screen(page)
    expect(stop).to_be_in_viewport()
    expect(status).to_be_in_viewport()

    # A follow-up while the answer is being written: Send comes back beside Stop as one
    # types; the follow-up shows below the answer, as the next question.
    page.locator("#composer textarea").fill(follow_up)
    expect(send_button).to_be_visible()
    expect(stop).to_be_visible()
    send_button.click()
    waiting = page.locator(f"#followups-{run_id} .msg.inject")
    expect(waiting).to_contain_text(follow_up)
    expect(waiting.get_by_text(ANSWERS_NEXT)).to_be_visible()
    expect(waiting.get_by_text(READS_AFTER_STEP)).to_be_hidden()
    expect(waiting).to_be_in_viewport()
    answer_box, waiting_box = answer.bounding_box(), waiting.bounding_box()
    assert waiting_box["y"] >= answer_box["y"] + answer_box["height"], (answer_box, waiting_box)
    expect(send_button).to_be_hidden()  # the box is empty again
    assert_composer_on_screen(page)
    desktop = page.viewport_size["width"] > 767
    screenshot(page, docs="stop-and-follow-up" if desktop else None)
    window_shot(page)

    stop.click()
    expect(page.locator(f"#status-{run_id}")).to_contain_text("Stopped.")
    expect(stop).to_have_count(0)
    expect(send_button).to_be_visible()
    expect(status).to_be_hidden()

    page.reload()
    expect(page.locator(f"#status-{run_id}")).to_contain_text("Stopped.")
    expect(send_button).to_be_visible()
    expect(stop).to_have_count(0)
    expect(status).to_be_hidden()


def test_the_composer_stays_at_the_bottom_after_the_first_answer(
    sized_page: Page, llm: ScriptedLLM
) -> None:
    page = sized_page
    llm.script({"content": "17 × 3 = 51."})
    new_conversation(page)
    assert assert_composer_on_screen(page) <= 24
    send_with_button(page, "What is 17*3?")
    run_id = latest_run(page)
    wait_finished(page, run_id)
    send_button, stop, _status = composer_parts(page)
    expect(send_button).to_be_visible()
    expect(stop).to_have_count(0)
    assert assert_composer_on_screen(page) <= 24  # at the bottom, not below the answer


def test_a_reload_mid_answer_shows_stop_and_the_follow_up_below_the_answer(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    follow_up = "And in Roman numerals?"
    chunks = ["17 × 3 ", "= ", "51", ", ", "as ", "the ", "calculator ", "says."]
    llm.script(
        {"chunks": chunks, "chunk_delay": 0.01, "pause_after": 3, "resume_on": "rest"},
        {"chunks": ["In Roman ", "numerals: LI."], "after_release": "second"},
    )
    new_conversation(chat_page)
    send(chat_page, "What is 17*3?")
    first = latest_run(chat_page)
    expect(chat_page.locator(f"#answer-{first}")).to_contain_text("17 × 3 = 51")
    send(chat_page, follow_up)
    expect(chat_page.locator(f"#followups-{first} .msg.inject")).to_contain_text(follow_up)

    chat_page.reload()
    record_composer(chat_page)
    send_button, stop, status = composer_parts(chat_page)
    expect(stop).to_be_visible()
    expect(send_button).to_be_hidden()
    expect(status).to_have_text("Writing the answer…")
    waiting = chat_page.locator(f"#followups-{first} .msg.inject")
    expect(waiting.get_by_text(ANSWERS_NEXT)).to_be_visible()
    answer_box, waiting_box = (
        chat_page.locator(f"#answer-{first}").bounding_box(),
        waiting.bounding_box(),
    )
    assert waiting_box["y"] >= answer_box["y"] + answer_box["height"], (answer_box, waiting_box)
    screenshot(chat_page)

    # The answer ends; the run answering the follow-up works (Stop is its), then ends.
    llm.release("rest")
    wait_finished(chat_page, first)
    expect(chat_page.locator("#messages section.run")).to_have_count(2)
    second = latest_run(chat_page)
    expect(stop).to_be_visible()
    expect(status).to_have_attribute("data-run", str(second))
    llm.release("second")
    wait_finished(chat_page, second)
    expect(chat_page.locator(f"#answer-{second}")).to_have_text("In Roman numerals: LI.")
    expect(stop).to_have_count(0)
    expect(send_button).to_be_visible()
    assert any(line.startswith(f"running:{second}:") for line in composer_states(chat_page))


def test_escape_and_a_failure_put_send_back(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script({"content": "Too late.", "delay": 60}, {"status": 400, "after_release": "fail"})
    new_conversation(chat_page)
    send_button, stop, status = composer_parts(chat_page)
    send(chat_page, "Think about this for a long time")
    stopped = latest_run(chat_page)
    expect(stop).to_be_visible()
    expect(status).to_have_text("Thinking (step 1)…")
    chat_page.keyboard.press("Escape")
    expect(chat_page.locator(f"#status-{stopped}")).to_contain_text("Stopped.")
    expect(stop).to_have_count(0)
    expect(send_button).to_be_visible()

    send(chat_page, "Try again")
    expect(chat_page.locator("#messages section.run")).to_have_count(2)
    failed = latest_run(chat_page)
    expect(stop).to_be_visible()
    llm.release("fail")
    expect(chat_page.locator(f"#status-{failed}")).to_have_class(re.compile(r"\bfailed\b"))
    expect(stop).to_have_count(0)
    expect(send_button).to_be_visible()
    expect(status).to_be_hidden()
