"""Export from the chat page's menu: the downloaded files hold the conversation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.e2e.conftest import ARTIFACTS, ScriptedLLM
from tests.e2e.test_chat_flows import (
    calculator_call,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e

ANSWER = "## Result\n\n**51**, from `17*3`."


def _download(page: Page, link: str) -> tuple[str, str]:
    """Open the chat menu, click ``link``; the file's suggested name and text."""
    page.get_by_label("Export and share").click()
    page.screenshot(path=str(ARTIFACTS / "export_chat_menu.png"))
    with page.expect_download() as info:
        page.get_by_role("link", name=link, exact=True).click()
    download = info.value
    return download.suggested_filename, Path(download.path()).read_text(encoding="utf-8")


def test_export_markdown_and_json_from_the_chat_menu(chat_page: Page, llm: ScriptedLLM) -> None:
    llm.script(calculator_call("17*3"), {"chunks": [ANSWER[:10], ANSWER[10:]]})
    new_conversation(chat_page)
    send(chat_page, "What is 17*3?")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)
    title = chat_page.locator("#conversation-title").input_value()

    name, text = _download(chat_page, "Export as Markdown")
    assert name.endswith(".md")
    assert text.startswith(f"# {title}\n")
    assert "## User\n\nWhat is 17*3?" in text
    assert "**Tool call:** `calculator`" in text and '"expression": "17*3"' in text
    assert f"## Assistant\n\n{ANSWER}" in text  # the answer's markdown source

    chat_page.reload()
    name, text = _download(chat_page, "Export as JSON")
    assert name.endswith(".json")
    document = json.loads(text)
    assert (document["format"], document["version"]) == ("agentsite.conversation", 1)
    assert [(m["role"], m["content"]) for m in document["messages"]] == [
        ("user", "What is 17*3?"),
        ("assistant", ANSWER),
    ]
    assert [run["id"] for run in document["runs"]] == [run_id]
