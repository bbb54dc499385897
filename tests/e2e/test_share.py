"""Sharing a conversation: a logged-out browser reads the snapshot; revoking ends it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_attachments import attach
from tests.e2e.test_chat_flows import (
    calculator_call,
    latest_run,
    new_conversation,
    send,
    wait_finished,
)

pytestmark = pytest.mark.e2e


def _ask(page: Page, question: str) -> int:
    send(page, question)
    run_id = latest_run(page)
    wait_finished(page, run_id)
    return run_id


def test_a_shared_snapshot_is_public_frozen_and_revocable(
    chat_page: Page,
    llm: ScriptedLLM,
    new_context: Callable[[], BrowserContext],
    screenshot: Callable[..., Path],
) -> None:
    llm.script(calculator_call("17*3"), "It is **51**.", "A later answer.")
    new_conversation(chat_page)
    _ask(chat_page, "What is 17*3?")

    chat_page.get_by_label("Export and share").click()
    chat_page.get_by_role("button", name="Create share link").click()
    expect(chat_page).to_have_url(re.compile(r"/settings/shares/#share-\d+$"))
    row_id = chat_page.url.rsplit("#", 1)[1]
    link = chat_page.locator(f"#{row_id} .share-url")
    url = link.get_attribute("href") or ""
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/s/[\w-]{43}/", url)

    chat_page.go_back()  # a later question and answer, after sharing
    chat_page.wait_for_load_state("load")
    _ask(chat_page, "A later question")

    stranger = new_context()  # no session: logged out
    try:
        page = stranger.new_page()
        response = page.goto(url)
        assert response is not None and response.status == 200
        assert response.headers["x-robots-tag"] == "noindex, nofollow"
        expect(page.locator('meta[name="robots"]')).to_have_attribute("content", "noindex")
        messages = page.locator("#messages")
        expect(messages.locator(".msg.user")).to_have_text(["What is 17*3?"])
        expect(messages.locator(".tool-card .tool-name")).to_have_text("calculator")
        expect(messages.locator(".answer strong")).to_have_text("51")
        expect(messages).not_to_contain_text("A later")
        expect(page.locator(".who")).to_have_count(0)  # nobody is logged in here
        expect(page.locator("a[href^='/c/']")).to_have_count(0)
        messages.locator(".tool-card > summary").click()
        screenshot(page)  # test-artifacts/e2e/<test>.png

        # The owner revokes it from the settings page.
        chat_page.goto("/settings/shares/")
        chat_page.once("dialog", lambda dialog: dialog.accept())
        chat_page.locator(f"#{row_id}").get_by_role("button", name="Revoke").click()
        expect(chat_page.locator(f"#{row_id}")).to_contain_text("revoked")

        response = page.reload()
        assert response is not None and response.status == 404
        expect(page.locator("body")).not_to_contain_text("17*3")
    finally:
        stranger.close()


def _share(page: Page, conversation_id: int, **fields: bool) -> dict:
    """A shared link made through the API with the browser's session."""
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"/api/conversations/{conversation_id}/shares",
        data=fields,
        headers={"X-CSRFToken": token},
    )
    assert response.status == 201, response.text()
    return response.json()


def test_attached_files_are_shared_only_when_asked(
    chat_page: Page, llm: ScriptedLLM, new_context: Callable[[], BrowserContext]
) -> None:
    llm.script("Two fruits.")
    conversation_id = new_conversation(chat_page)
    attach(chat_page, "notes.md", "text/markdown", b"- apple\n- pear\n")
    chat_page.locator("#composer textarea").fill("What do these say?")
    chat_page.get_by_role("button", name="Send").click()
    wait_finished(chat_page, latest_run(chat_page))
    without = _share(chat_page, conversation_id)
    # Ticked on the chat's share form.
    chat_page.get_by_label("Export and share").click()
    chat_page.get_by_label("Include attached files").check()
    chat_page.get_by_role("button", name="Create share link").click()
    expect(chat_page).to_have_url(re.compile(r"/settings/shares/#share-\d+$"))
    row_id = chat_page.url.rsplit("#", 1)[1]
    expect(chat_page.locator(f"#{row_id}")).to_contain_text("included")
    with_files = {
        "id": int(row_id.removeprefix("share-")),
        "url": chat_page.locator(f"#{row_id} .share-url").get_attribute("href") or "",
    }

    stranger = new_context()
    try:
        page = stranger.new_page()
        page.goto(without["url"])
        expect(page.locator(".msg.user")).to_have_text("What do these say?")
        expect(page.locator(".file-chip")).to_have_count(0)

        page.goto(with_files["url"])
        chip = page.locator(".msg.user .file-chip")
        expect(chip).to_have_count(1)
        expect(chip.locator(".file-name")).to_have_text("notes.md")
        with page.expect_download() as info:
            chip.get_by_role("link").click()
        download = info.value
        assert download.suggested_filename == "notes.md"
        assert Path(download.path()).read_bytes() == b"- apple\n- pear\n"
        file_url = chip.get_by_role("link").get_attribute("href") or ""
        assert re.fullmatch(r"/s/[\w-]{43}/files/0/", file_url)

        token = next(c["value"] for c in chat_page.context.cookies() if c["name"] == "csrftoken")
        revoked = chat_page.request.delete(
            f"/api/shares/{with_files['id']}", headers={"X-CSRFToken": token}
        )
        assert revoked.status == 204
        response = page.goto(file_url)
        assert response is not None and response.status == 404
    finally:
        stranger.close()
