"""Automatic titles in the browser (issue 46): after the first answer, the sidebar's row,
the chat's header and the tab take the model's title without a reload.

The package's server runs with automatic titles off (tests/conftest.py: its other tests
read the model's last request); this module starts one of its own with them on, on a
database of its own, beside the same scripted LLM server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.e2e.conftest import ScriptedLLM, log_in, serve_app
from tests.e2e.test_chat_flows import Screenshot, latest_run, send, wait_finished

pytestmark = pytest.mark.e2e

MARK = "() => { window.__samePage = true; }"
SAME_PAGE = "() => window.__samePage === true"


@pytest.fixture(scope="module")
def titling_server(
    artifacts: Path,
    server_env: dict[str, str],
    scripted_server: ScriptedLLM,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    env = {
        **server_env,
        "AGENTSITE_AUTO_TITLES": "true",
        "AGENTSITE_VAR_DIR": str(tmp_path_factory.mktemp("agentsite-var-titles")),
    }
    with serve_app(env, scripted_server, artifacts / "daphne-titles.log") as url:
        yield url


def test_the_first_answer_retitles_the_sidebar_and_the_header_live(
    new_context: Callable[..., BrowserContext],
    titling_server: str,
    llm: ScriptedLLM,
    screenshot: Screenshot,
) -> None:
    context = new_context(titling_server)
    page = context.new_page()
    log_in(page, "alice")
    page.goto("/c/new/")
    # The answer, then the title call's reply, held until the answer is on the page.
    llm.script(
        "Paris has been the capital since the Middle Ages.",
        {"content": "“Capital of France.”", "after_release": "title"},
    )
    page.evaluate(MARK)
    question = "Why is Paris the capital of France?"
    send(page, question)
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    chat_id = int(re.findall(r"/c/(\d+)/$", page.url)[0])
    run_id = latest_run(page)
    wait_finished(page, run_id)
    header = page.locator("#conversation-title")
    row_link = page.locator(f"#conversation-{chat_id} a[data-chat-link]")
    expect(header).to_have_value(question)
    expect(row_link).to_have_text(question)

    llm.release("title")

    expect(header).to_have_value("Capital of France")
    expect(row_link).to_have_text("Capital of France")
    expect(page.locator(f"#conversation-{chat_id}")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page).to_have_title("Capital of France · agentsite")
    assert page.evaluate(SAME_PAGE)  # no reload
    title_request = llm.requests()[-1]
    assert "stream" not in title_request
    assert question in title_request["messages"][-1]["content"]
    screenshot(page)
    # And after a reload, from the row.
    page.reload()
    expect(header).to_have_value("Capital of France")
    expect(row_link).to_have_text("Capital of France")
    context.close()


# Counts the title frames that reached the header's title, swapped or not.
COUNT_TITLE_FRAMES = """() => {
  window.__titleFrames = 0;
  document.addEventListener("htmx:oobBeforeSwap", (event) => {
    if (event.detail.target.id === "conversation-title") window.__titleFrames += 1;
  });
}"""


def test_a_title_being_typed_is_not_replaced_and_then_wins(
    new_context: Callable[..., BrowserContext], titling_server: str, llm: ScriptedLLM
) -> None:
    context = new_context(titling_server)
    page = context.new_page()
    log_in(page, "alice")
    page.goto("/c/new/")
    llm.script("An answer.", {"content": "Model title", "after_release": "title"})
    send(page, "Tell me something")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    chat_id = int(re.findall(r"/c/(\d+)/$", page.url)[0])
    wait_finished(page, latest_run(page))
    page.evaluate(COUNT_TITLE_FRAMES)
    header = page.locator("#conversation-title")
    header.fill("My own title")  # typing, not sent yet

    llm.release("title")
    page.wait_for_function("() => window.__titleFrames > 0")

    expect(header).to_have_value("My own title")
    expect(header).to_be_focused()
    header.press("Enter")  # sent: the user's title, from now on
    expect(header).to_have_value("My own title")
    expect(page.locator(f"#conversation-{chat_id} a[data-chat-link]")).to_have_text("My own title")
    context.close()
