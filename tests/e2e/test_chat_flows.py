"""The chat as a user sees it: real Chromium, real daphne, the scripted LLM server.

Each test scripts the LLM replies it needs (``llm.script``), drives the page like a user
and waits with Playwright's auto-retrying ``expect``; never with sleeps. Transient states
(a tool card while its tool runs, the answer while it streams) are recorded in the page
by a MutationObserver, so they are asserted without racing the stream.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import TIMEOUT_MS, ScriptedLLM, log_in

pytestmark = pytest.mark.e2e

Screenshot = Callable[..., Path]

# Every DOM change under #messages appends a snapshot of each run block (when it differs).
RECORDER = """() => {
  if (window.__e2eStates) return;
  const states = [];
  let last = "";
  const text = (el) => (el ? el.textContent : null);
  const snapshot = () => {
    const runs = [...document.querySelectorAll("#messages section.run")].map((run) => ({
      id: Number(run.dataset.run),
      // While it streams, the markdown source that arrived; then the rendered answer.
      answer: text(run.querySelector(".answer-src") || run.querySelector(".answer")) || "",
      streaming: !!run.querySelector(".answer.streaming"),
      status: (text(run.querySelector(".run-status")) || "").trim(),
      cards: [...run.querySelectorAll("details.tool-card")].map((card) => ({
        id: card.id,
        cls: card.className,
        args: text(card.querySelector(".tool-args")),
        observation: text(card.querySelector(".tool-observation")),
      })),
    }));
    const key = JSON.stringify(runs);
    if (key !== last) { last = key; states.push(runs); }
  };
  snapshot();
  new MutationObserver(snapshot).observe(document.getElementById("messages"), {
    childList: true, subtree: true, characterData: true, attributes: true,
  });
  window.__e2eStates = states;
}"""


def usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def calculator_call(expression: str, **extra: Any) -> dict[str, Any]:
    """A scripted reply calling the calculator tool."""
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": expression}}]} | extra


# -------------------------------------------------------------------------- helpers


def new_conversation(page: Page) -> int:
    """Open the chat page of a new, empty conversation; returns its id.

    The site creates a conversation with its first message ("New chat" is an empty
    composer, tests/e2e/test_sidebar.py); these tests start from an existing one, made
    through the JSON API with the browser's session, as any API client may.
    """
    page.goto("/c/new/")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post("/api/conversations", data={}, headers={"X-CSRFToken": token})
    assert response.status == 201, response.text()
    conversation_id = int(response.json()["id"])
    page.goto(f"/c/{conversation_id}/")
    # Enter-to-send needs chat.js and htmx.
    page.wait_for_load_state("load")
    return conversation_id


def send(page: Page, text: str) -> None:
    """Type a message in the composer and press Enter."""
    box = page.locator("#composer textarea")
    box.fill(text)
    box.press("Enter")


def latest_run(page: Page) -> int:
    """The id of the last run block on the page."""
    run = page.locator("#messages section.run").last
    expect(run).to_be_attached()
    return int(run.get_attribute("data-run") or 0)


def wait_finished(page: Page, run_id: int) -> None:
    """Wait for the run's footer (rendered by its ``done`` event)."""
    expect(page.locator(f"#footer-{run_id} .iterations")).to_be_visible()
    expect(page.locator(f"#answer-{run_id}")).not_to_have_class(re.compile(r"\bstreaming\b"))


def record(page: Page) -> None:
    page.evaluate(RECORDER)


def recorded(page: Page, run_id: int) -> list[dict[str, Any]]:
    """The recorded snapshots of one run block, in order."""
    states = page.evaluate("() => window.__e2eStates || []")
    return [run for snapshot in states for run in snapshot if run["id"] == run_id]


def streamed_texts(states: list[dict[str, Any]]) -> list[str]:
    """Distinct non-empty texts the answer showed while streaming, in order."""
    seen: list[str] = []
    for state in states:
        if state["streaming"] and state["answer"] and state["answer"] not in seen:
            seen.append(state["answer"])
    return seen


def made_of(text: str, chunks: list[str]) -> bool:
    """Whether ``text`` is some of ``chunks`` concatenated in order, none twice."""
    position = 0
    for chunk in chunks:
        if text.startswith(chunk, position):
            position += len(chunk)
    return position == len(text)


def interrupts(request: dict[str, Any]) -> list[str]:
    """The user messages of an LLM request that carry a follow-up ("[USER INTERRUPT]")."""
    return [
        message["content"]
        for message in request["messages"]
        if message["role"] == "user" and "[USER INTERRUPT]" in (message.get("content") or "")
    ]


# ---------------------------------------------------------------------------- flows


def test_log_in(new_context: Callable[[], BrowserContext], screenshot: Screenshot) -> None:
    context = new_context()
    page = context.new_page()
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".error")).to_contain_text("didn't match")
    expect(page.locator(".who")).to_have_count(0)

    log_in(page, "alice")
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", name="Conversations")).to_be_visible()
    screenshot(page)
    context.close()


def test_start_a_conversation(chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot) -> None:
    llm.script({"chunks": ["Hello ", "there!"]})
    chat_page.goto("/")
    box = chat_page.locator("#composer textarea")
    expect(box).to_be_visible()
    expect(box).to_be_focused()
    screenshot(chat_page)

    send(chat_page, "Hello")
    expect(chat_page).to_have_url(re.compile(r"/c/\d+/$"))
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#answer-{run_id}")).to_have_text("Hello there!")
    conversation_id = int(re.findall(r"/c/(\d+)/$", chat_page.url)[0])
    expect(chat_page.locator(f"#conversation-{conversation_id}")).to_be_visible()


def test_send_a_message_with_enter(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    llm.script({"chunks": ["Hello ", "Alice!"]})
    new_conversation(chat_page)
    box = chat_page.locator("#composer textarea")
    box.fill("First line")
    box.press("Shift+Enter")
    box.press_sequentially("second line")
    expect(box).to_have_value("First line\nsecond line")
    expect(chat_page.locator("#messages .msg.user")).to_have_count(0)

    box.press("Enter")
    message = chat_page.locator("#messages .msg.user")
    expect(message).to_have_count(1)
    expect(message.locator(".content")).to_have_text("First line\nsecond line")
    expect(box).to_have_value("")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#answer-{run_id}")).to_have_text("Hello Alice!")
    chat_page.reload()
    expect(chat_page.locator("#conversation-title")).to_have_value("First line second line")
    screenshot(chat_page)

    first = llm.requests()[0]
    assert first["messages"][-1] == {"role": "user", "content": "First line\nsecond line"}


def test_tool_card_appears_then_fills_in(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    llm.script(
        # The tool call waits for the message's response: frames arriving while it is in
        # flight are applied together once it lands, and the running card would not show.
        calculator_call("6*7", after_release="posted"),
        # The next reply is slow: the finished card shows while the agent thinks on.
        {"chunks": ["6 × 7 ", "is **42**."], "delay": 0.5},
    )
    new_conversation(chat_page)
    record(chat_page)
    send(chat_page, "What is 6*7?")
    run_id = latest_run(chat_page)  # the response has added the run's block
    llm.release("posted")
    card = chat_page.locator(f"#card-{run_id}-1")
    expect(card).to_have_class(re.compile(r"\bok\b"))
    expect(card.locator(".tool-name")).to_have_text("calculator")
    expect(card.locator(".tool-args")).to_have_text('{ "expression": "6*7" }')
    expect(card.locator(".tool-observation")).to_have_text("6*7 = 42")
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#steps-{run_id} details.tool-card")).to_have_count(1)

    states = [state for state in recorded(chat_page, run_id) if state["cards"]]
    first = states[0]["cards"][0]
    assert "running" in first["cls"].split(), states
    assert '"expression": "6*7"' in (first["args"] or ""), states
    assert first["observation"] is None, states
    # Then the card is complete while the run goes on with its next step.
    assert any(
        "ok" in state["cards"][0]["cls"].split()
        and state["cards"][0]["observation"] == "6*7 = 42"
        and "Thinking (step 2)" in state["status"]
        for state in states
    ), states
    card.locator("summary").click()
    expect(card).to_have_attribute("open", "")
    screenshot(chat_page)


def test_frames_that_beat_the_post_response_are_not_lost(chat_page: Page, llm: ScriptedLLM) -> None:
    """A run starts once the message is saved: its frames may reach the page before the
    POST response that adds the run's block. Here the response is held until the whole run
    has streamed over the socket; the page must still show every step and the answer."""
    llm.script(calculator_call("6*7"), {"chunks": ["It is ", "**42**."]})
    sockets: list[Any] = []
    chat_page.on("websocket", lambda socket: sockets.append(socket))
    new_conversation(chat_page)
    held: list[Any] = []
    chat_page.route("**/messages/", lambda route: held.append(route))  # the POST waits here
    send(chat_page, "What is 6*7?")
    # Playwright calls the route handler after the request event, when it next dispatches
    # (waiting for the request alone could return first): dispatch until it has run.
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while not held and time.monotonic() < deadline:
        chat_page.wait_for_timeout(10)
    assert len(held) == 1, "the message POST was not intercepted"
    route = held[0]
    with sockets[-1].expect_event(
        "framereceived", lambda frame: 'id="footer-' in str(frame), timeout=TIMEOUT_MS
    ):
        response = route.fetch()  # the server saves the message and starts the run
    route.fulfill(response=response)  # the page gets the response after every frame

    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#card-{run_id}-1 .tool-observation")).to_have_text("6*7 = 42")
    expect(chat_page.locator(f"#answer-{run_id}")).to_contain_text("It is 42.")


def test_answer_streams_and_renders_markdown(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    chunks = ["The ", "answer ", "is ", "**forty-two**", ", ", "says ", "`calc`."]
    llm.script({"chunks": chunks, "chunk_delay": 0.2})
    new_conversation(chat_page)
    record(chat_page)
    send(chat_page, "Stream me an answer")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer.locator("strong")).to_have_text("forty-two")
    expect(answer.locator("code")).to_have_text("calc")
    expect(answer).to_have_text("The answer is forty-two, says calc.")
    expect(answer).not_to_contain_text("**")
    wait_finished(chat_page, run_id)

    full = "".join(chunks)
    partials = [text for text in streamed_texts(recorded(chat_page, run_id)) if text != full]
    assert len(partials) >= 2, partials
    assert all(full.startswith(text) for text in partials), partials
    screenshot(chat_page)


def test_footer_shows_iterations_tokens_and_time(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    llm.script(
        calculator_call("1234*5678", usage=usage(100, 10)),
        {
            "chunks": ["**1234 × 5678 = ", "7,006,652**\n\n", "Computed with the ", "calculator."],
            "chunk_delay": 0.05,
            "usage": usage(170, 20),
        },
    )
    new_conversation(chat_page)
    send(chat_page, "What is 1234 × 5678?")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    footer = chat_page.locator(f"#footer-{run_id}")
    expect(footer.locator(".iterations")).to_have_text("2 steps")
    expect(footer.locator(".tokens")).to_have_text("300 tokens")
    expect(footer.locator(".elapsed")).to_have_text(re.compile(r"^\d+\.\d s$"))
    expect(chat_page.locator(f"#answer-{run_id} strong")).to_have_text("1234 × 5678 = 7,006,652")

    chat_page.reload()  # the title and the answer's pin button show after a page load
    expect(footer.locator(".tokens")).to_have_text("300 tokens")
    chat_page.locator(f"#card-{run_id}-1 summary").click()
    expect(chat_page.locator(f"#card-{run_id}-1 .tool-observation")).to_be_visible()
    screenshot(chat_page, docs="chat")


def test_follow_up_is_injected_and_answered(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    follow_up = "Also write the result in words, please."
    llm.script(
        # Slow first step: the follow-up arrives while the agent works.
        calculator_call("17*3", delay=2.5),
        {"chunks": ["17 × 3 = 51, ", "in words: ", "fifty-one."], "chunk_delay": 0.05},
    )
    new_conversation(chat_page)
    send(chat_page, "What is 17*3?")
    run_id = latest_run(chat_page)
    expect(chat_page.locator(f"#status-{run_id}")).to_contain_text("Thinking (step 1)")

    send(chat_page, follow_up)
    # Waiting below the answer, then (taken in) one of the run's steps.
    injected = chat_page.locator(f"#run-{run_id} .msg.inject")
    expect(injected).to_contain_text(follow_up)
    expect(injected).to_contain_text("the agent will read it after its current step")
    expect(injected).to_contain_text("delivered to the agent")
    expect(injected).to_have_count(1)
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#answer-{run_id}")).to_have_text("17 × 3 = 51, in words: fifty-one.")
    expect(chat_page.locator("#messages section.run")).to_have_count(1)
    screenshot(chat_page)

    requests = llm.requests()
    assert len(requests) == 2, [r["messages"] for r in requests]
    assert interrupts(requests[0]) == []
    (interrupt,) = interrupts(requests[1])
    assert interrupt.startswith("[USER INTERRUPT]") and follow_up in interrupt, interrupt


def test_follow_up_sent_while_the_answer_streams_is_answered_next(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    """Too late for the agent (it is writing its answer): the follow-up becomes the next
    run's question, and that run appears and streams without a reload."""
    follow_up = "And in Roman numerals?"
    llm.script(
        {"chunks": ["17 × 3 ", "= ", "51."], "chunk_delay": 0.7},
        {"chunks": ["In Roman ", "numerals: LI."], "chunk_delay": 0.05},
    )
    new_conversation(chat_page)
    send(chat_page, "What is 17*3?")
    first = latest_run(chat_page)
    expect(chat_page.locator(f"#answer-{first}")).to_contain_text("17 × 3")

    send(chat_page, follow_up)
    wait_finished(chat_page, first)
    expect(chat_page.locator(f"#answer-{first}")).to_have_text("17 × 3 = 51.")
    runs = chat_page.locator("#messages section.run")
    expect(runs).to_have_count(2)
    second = latest_run(chat_page)
    wait_finished(chat_page, second)
    expect(chat_page.locator(f"#answer-{second}")).to_have_text("In Roman numerals: LI.")
    expect(chat_page.locator(".msg.user").last).to_contain_text(follow_up)
    expect(chat_page.locator(".msg.inject")).to_have_count(0)
    screenshot(chat_page)

    chat_page.reload()  # the page rebuilt from the database shows the same
    expect(runs).to_have_count(2)
    expect(chat_page.locator(f"#answer-{second}")).to_have_text("In Roman numerals: LI.")
    expect(chat_page.locator(".msg.user")).to_have_count(2)
    expect(chat_page.locator(".msg.inject")).to_have_count(0)
    requests = llm.requests()
    assert len(requests) == 2, [r["messages"] for r in requests]
    assert follow_up in requests[1]["messages"][-1]["content"]


def test_stop_ends_a_long_run(chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot) -> None:
    llm.script({"content": "Too late.", "delay": 60})
    new_conversation(chat_page)
    send(chat_page, "Think about this for a long time")
    run_id = latest_run(chat_page)
    status = chat_page.locator(f"#status-{run_id}")
    expect(status).to_contain_text("Thinking (step 1)")
    stop = status.locator("button.stop")
    stop.click()
    expect(status).to_contain_text("Stopped.")
    expect(status).to_have_class(re.compile(r"\bcancelled\b"))
    expect(stop).to_have_count(0)
    expect(chat_page.locator(f"#answer-{run_id}")).not_to_have_class(re.compile(r"streaming"))
    screenshot(chat_page)

    chat_page.reload()
    expect(status).to_contain_text("Stopped.")
    expect(status.locator("button.stop")).to_have_count(0)
    assert len(llm.requests()) == 1


def test_reload_mid_run_keeps_streaming(
    chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    chunks = ["Two ", "to ", "the ", "tenth ", "power ", "is ", "1024", "."]
    full = "".join(chunks)
    llm.script(
        calculator_call("2**10"),
        {"chunks": chunks, "chunk_delay": 0.5},
    )
    new_conversation(chat_page)
    send(chat_page, "What is 2**10?")
    run_id = latest_run(chat_page)
    answer = chat_page.locator(f"#answer-{run_id}")
    expect(answer).to_have_class(re.compile(r"\bstreaming\b"))
    expect(answer).to_contain_text("Two to")

    chat_page.reload()
    record(chat_page)
    card = chat_page.locator(f"#card-{run_id}-1")
    expect(card).to_have_class(re.compile(r"\bok\b"))
    expect(card.locator(".tool-observation")).to_have_text("2**10 = 1024")
    wait_finished(chat_page, run_id)
    expect(answer).to_have_text(full)
    expect(chat_page.locator("#messages section.run")).to_have_count(1)
    expect(chat_page.locator("#messages .msg.user")).to_have_count(1)
    expect(chat_page.locator(f"#steps-{run_id} details.tool-card")).to_have_count(1)

    # It kept streaming after the reload, and never showed a piece twice.
    texts = streamed_texts(recorded(chat_page, run_id))
    assert len(texts) >= 2, f"no live streaming after the reload: {texts}"
    assert all(made_of(text, chunks) for text in texts), texts
    lost = [text for text in texts if not full.startswith(text)]
    assert not lost, f"answer pieces lost after a reload: {texts}"
    screenshot(chat_page)


def test_second_user_gets_404(
    chat_page: Page,
    new_context: Callable[[], BrowserContext],
    app_server: str,
    screenshot: Screenshot,
) -> None:
    conversation_id = new_conversation(chat_page)
    context = new_context()
    page = context.new_page()
    log_in(page, "bob")
    expect(page.locator(f"#conversation-{conversation_id}")).to_have_count(0)

    response = page.goto(f"/c/{conversation_id}/")
    assert response is not None and response.status == 404
    expect(page.locator("#composer")).to_have_count(0)
    ws_url = app_server.replace("http", "ws", 1) + f"/ws/conversations/{conversation_id}/"
    outcome = page.evaluate(
        """(url) => new Promise((resolve) => {
            const ws = new WebSocket(url);
            ws.onopen = () => { ws.close(); resolve("open"); };
            ws.onclose = (event) => resolve("closed " + event.code);
        })""",
        ws_url,
    )
    assert outcome.startswith("closed"), outcome
    screenshot(page)
    context.close()


def test_pin_toggle_persists(chat_page: Page, llm: ScriptedLLM, screenshot: Screenshot) -> None:
    llm.script({"chunks": ["Noted: ", "your name is Alice."]})
    new_conversation(chat_page)
    send(chat_page, "Remember: my name is Alice.")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    pin = chat_page.locator("#messages .msg.user button.pin")
    expect(pin).to_have_attribute("aria-pressed", "false")

    pin.click()
    expect(pin).to_have_attribute("aria-pressed", "true")
    expect(pin).to_have_attribute("title", re.compile(r"^Unpin"))
    chat_page.reload()
    expect(pin).to_have_attribute("aria-pressed", "true")
    screenshot(chat_page)

    pin.click()
    expect(pin).to_have_attribute("aria-pressed", "false")
    chat_page.reload()
    expect(pin).to_have_attribute("aria-pressed", "false")


def test_answer_pin_appears_without_reload(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script({"chunks": ["All ", "done."]})
    new_conversation(chat_page)
    send(chat_page, "Say done")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    expect(chat_page.locator(f"#footer-{run_id} button.pin")).to_be_visible(timeout=2_000)
