"""Inline citations (issue 45): an answer's "[n]" opens the passage its run found, once the
answer has streamed, after a reload, and on a shared link (a copy served by the share)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.e2e.conftest import ScriptedLLM, _manage
from tests.e2e.test_chat_flows import latest_run, new_conversation, send, wait_finished

pytestmark = pytest.mark.e2e

PASSAGE = "Everyone gets 25 days of holiday a year; unused days carry over."
ANSWER = (
    "You get **25 days** a year [1].\n\n"
    "```python\nleave[1] = 25\n```\n\n"
    "The contract [7] may say more."
)
SOURCE = "Source 1: handbook.pdf, page 3, Holidays"

# The base as indexing leaves it (rows written directly: no background indexing to wait
# for); SQLite's triggers put the passage in the full-text index.
HANDBOOK = f"""
import hashlib
from django.contrib.auth import get_user_model
from django.core.files.base import ContentFile
from files.models import StoredFile
from knowledge import services
from knowledge.models import Chunk, Document

alice = get_user_model().objects.get(username="alice")
base = services.base_create(alice, "Handbook")
data = {PASSAGE!r}.encode()
stored = StoredFile.objects.create(
    owner=alice, name="handbook.pdf", kind="pdf", content_type="application/pdf",
    size=len(data), sha256=hashlib.sha256(data).hexdigest(),
    blob=ContentFile(data, name="blob"), text=data.decode(), pages=[0],
)
document = Document.objects.create(
    base=base, file=stored, name="handbook.pdf", status="ready", chunk_count=1
)
chunk = Chunk.objects.create(
    document=document, position=0, page=3, heading="Holidays", text=data.decode()
)
print("IDS", base.pk, chunk.pk)
"""


def _handbook(server_env: dict[str, str]) -> tuple[int, int]:
    """A knowledge base of alice's with one passage: (base id, chunk id)."""
    found = re.search(r"^IDS (\d+) (\d+)$", _manage(server_env, "shell", "-c", HANDBOOK), re.M)
    assert found is not None
    return int(found.group(1)), int(found.group(2))


def _attach(page: Page, conversation_id: int, base_id: int) -> None:
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.patch(
        f"/api/conversations/{conversation_id}",
        data={"knowledge": [base_id]},
        headers={"X-CSRFToken": token},
    )
    assert response.status == 200, response.text()


def _expect_cited(answer: Locator, href: str) -> None:
    """[1] links to its passage by name; [7] (no such source) and the code stay text."""
    link = answer.get_by_role("link", name=SOURCE)
    expect(link).to_have_count(1)
    expect(link).to_have_attribute("href", href)
    expect(link).to_have_text("[1]")
    expect(answer.locator("sup.citation")).to_have_count(1)
    expect(answer.locator("sup.citation a")).to_have_count(1)
    expect(answer).to_contain_text("The contract [7] may say more.")
    expect(answer.locator("pre code")).to_have_text("leave[1] = 25")
    expect(answer.locator("pre a")).to_have_count(0)


def _open_passage(page: Page, link: Locator) -> Page:
    with page.expect_popup() as popup:
        link.click()
    passage = popup.value
    passage.wait_for_load_state("load")
    return passage


def test_citations_link_live_after_a_reload_and_on_a_share(
    chat_page: Page,
    llm: ScriptedLLM,
    server_env: dict[str, str],
    new_context: Callable[[], BrowserContext],
    screenshot: Callable[..., Path],
) -> None:
    base_id, chunk_id = _handbook(server_env)
    conversation_id = new_conversation(chat_page)
    _attach(chat_page, conversation_id, base_id)
    llm.script(
        {"tool_calls": [{"name": "search_knowledge", "arguments": {"query": "holiday"}}]},
        {"chunks": [ANSWER[:30], ANSWER[30:60], ANSWER[60:]]},
    )
    chat_page.reload()
    chat_page.wait_for_load_state("load")

    send(chat_page, "How much holiday do I get?")
    run_id = latest_run(chat_page)
    wait_finished(chat_page, run_id)

    # As the run finishes live: the streamed answer's final HTML links [1].
    answer = chat_page.locator(f"#answer-{run_id}")
    live_passage = f"/knowledge/passages/{chunk_id}/"
    _expect_cited(answer, live_passage)
    expect(chat_page.locator(f"#run-{run_id} .sources li")).to_have_count(1)
    screenshot(chat_page)

    chat_page.reload()
    answer = chat_page.locator(f"#answer-{run_id}")
    _expect_cited(answer, live_passage)
    passage = _open_passage(chat_page, answer.get_by_role("link", name=SOURCE))
    expect(passage.locator("blockquote.passage")).to_have_text(PASSAGE)
    passage.close()

    # Shared: the citation opens the share's copy, for a reader who cannot read the base.
    chat_page.get_by_label("Export and share").click()
    chat_page.get_by_role("button", name="Create share link").click()
    expect(chat_page).to_have_url(re.compile(r"/settings/shares/#share-\d+$"))
    row_id = chat_page.url.rsplit("#", 1)[1]
    url = chat_page.locator(f"#{row_id} .share-url").get_attribute("href") or ""
    token = url.rstrip("/").rsplit("/", 1)[1]

    stranger = new_context()
    try:
        page = stranger.new_page()
        page.goto(url)
        shared = page.locator(".answer")
        copy = f"/s/{token}/passages/0/"
        _expect_cited(shared, copy)
        expect(page.locator(".sources a")).to_have_attribute("href", copy)
        passage = _open_passage(page, shared.get_by_role("link", name=SOURCE))
        expect(passage.locator("blockquote.passage")).to_have_text(PASSAGE)
        expect(passage.locator("h1")).to_have_text("handbook.pdf")
        passage.close()
        response = page.goto(live_passage)  # the base itself: not for strangers
        assert response is not None and "/accounts/login/" in page.url

        chat_page.goto("/settings/shares/")
        chat_page.once("dialog", lambda dialog: dialog.accept())
        chat_page.locator(f"#{row_id}").get_by_role("button", name="Revoke").click()
        expect(chat_page.locator(f"#{row_id}")).to_contain_text("revoked")
        response = page.goto(copy)
        assert response is not None and response.status == 404
        expect(page.locator("body")).not_to_contain_text("25 days")
    finally:
        stranger.close()
