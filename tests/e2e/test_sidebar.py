"""The conversations sidebar beside the chat, at desktop and phone widths (issue 30).

Real Chromium, real daphne, the scripted LLM server. Users of their own (seeded through
``manage.py shell``; names no other test module uses) keep these lists apart from the
other browser tests' conversations.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, WebSocket, expect

from conversations.pages.sidebar import PAGE_SIZE
from tests.e2e.conftest import ScriptedLLM, _manage, log_in
from tests.e2e.test_chat_flows import (
    Screenshot,
    latest_run,
    record,
    recorded,
    send,
    streamed_texts,
    wait_finished,
)
from tests.e2e.test_csp import Violations

pytestmark = pytest.mark.e2e

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# A full page load resets this; an htmx swap of the main column keeps it.
MARK = "() => { window.__samePage = true; }"
SAME_PAGE = "() => window.__samePage === true"


def seed(server_env: dict[str, str], username: str, password: str, chats: list[tuple]) -> None:
    """A user and their conversations: ``(title, days ago)``, each with one question."""
    _manage(
        server_env,
        "shell",
        "-c",
        f"""
import datetime as dt
from django.contrib.auth import get_user_model
from django.utils import timezone
from conversations.models import Conversation, Message
from conversations.services import conversation_create

user = get_user_model().objects.create_user({username!r}, password={password!r})
now = timezone.now()
for n, (title, days) in enumerate({chats!r}):
    chat = conversation_create(owner=user, title=title)
    Message.objects.create(conversation=chat, seq=1, role="user", content="About " + title)
    Conversation.objects.filter(pk=chat.pk).update(
        last_message_seq=1, updated_at=now - dt.timedelta(days=days, seconds=n)
    )
""",
    )


@pytest.fixture(scope="module")
def sam(server_env: dict[str, str], app_server: str) -> tuple[str, str]:
    """60 conversations: 57 today, 2 in the previous week, 1 older (two pages)."""
    chats = [(f"Chat {n:02d}", 0) for n in range(1, 58)]
    chats += [("Last week one", 3), ("Last week two", 4), ("Long ago", 40)]
    seed(server_env, "sidebar-sam", "sam-e2e-pw-3317", chats)
    return "sidebar-sam", "sam-e2e-pw-3317"


@pytest.fixture(scope="module")
def dana(server_env: dict[str, str], app_server: str) -> tuple[str, str]:
    """A few conversations to rename, archive and delete."""
    chats = [(name, 0) for name in ("Keep me", "Archive me", "Delete me", "Rename me")]
    seed(server_env, "sidebar-dana", "dana-e2e-pw-8823", chats)
    return "sidebar-dana", "dana-e2e-pw-8823"


def open_as(
    new_context: Callable[[], BrowserContext], who: tuple[str, str], viewport: dict[str, int]
) -> Page:
    context = new_context()
    page = context.new_page()
    page.set_viewport_size(viewport)
    log_in(page, *who)
    return page


def row(page: Page, title: str):
    return page.locator("#sidebar .conversation-row").filter(
        has=page.get_by_role("link", name=title, exact=True)
    )


def chat_id(page: Page) -> int:
    return int(re.findall(r"/c/(\d+)/$", page.url)[0])


def test_desktop_sidebar_groups_pages_and_switches_chats_live(
    new_context: Callable[[], BrowserContext],
    sam: tuple[str, str],
    llm: ScriptedLLM,
    screenshot: Screenshot,
) -> None:
    page = open_as(new_context, sam, DESKTOP)
    violations = Violations(page)
    sockets: list[WebSocket] = []
    page.on("websocket", lambda socket: sockets.append(socket))
    page.goto("/")
    sidebar = page.locator("#sidebar")
    rows = sidebar.locator(".conversation-row")
    expect(rows).to_have_count(50)
    expect(sidebar.locator(".group h3")).to_have_text(["Today"])
    expect(rows.first).to_contain_text("Chat 01")  # newest first

    # Scrolling to the end of the list loads the next page, headings where groups begin.
    sidebar.locator("li.more").scroll_into_view_if_needed()
    expect(rows).to_have_count(60)
    expect(sidebar.locator(".group h3")).to_have_text(["Today", "Previous 7 days", "Older"])
    expect(rows.last).to_contain_text("Long ago")

    # Switching chats swaps the main column only: same page, new URL, new websocket.
    row(page, "Chat 03").get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(page.locator("#conversation-title")).to_have_value("Chat 03")
    first_id = chat_id(page)
    page.evaluate(MARK)
    expect(row(page, "Chat 03")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page).to_have_title(re.compile("^Chat 03"))

    row(page, "Last week two").get_by_role("link").click()
    expect(page.locator("#conversation-title")).to_have_value("Last week two")
    second_id = chat_id(page)
    assert page.evaluate(SAME_PAGE), "switching conversation reloaded the page"
    expect(row(page, "Last week two")).to_have_class(re.compile(r"\bcurrent\b"))
    expect(row(page, "Chat 03")).not_to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#messages .msg.user .content")).to_have_text("About Last week two")

    # A message sent in the chat switched to streams its answer live over its socket.
    chunks = ["Streamed ", "live ", "after ", "switching."]
    llm.script({"chunks": chunks, "chunk_delay": 0.25})
    record(page)
    send(page, "Are you there?")
    run_id = latest_run(page)
    wait_finished(page, run_id)
    expect(page.locator(f"#answer-{run_id}")).to_have_text("Streamed live after switching.")
    # It is the newest conversation now: first in the list, still the open one.
    expect(rows.first).to_have_class(re.compile(r"\bcurrent\b"))
    expect(rows.first).to_contain_text("Last week two")
    assert len(streamed_texts(recorded(page, run_id))) >= 2, recorded(page, run_id)
    assert page.evaluate(SAME_PAGE)
    urls = [socket.url.split("?")[0] for socket in sockets]
    assert any(url.endswith(f"/ws/conversations/{first_id}/") for url in urls), urls
    assert urls[-1].endswith(f"/ws/conversations/{second_id}/"), urls
    assert all(socket.is_closed() for socket in sockets[:-1]), urls  # the old chat's went
    assert not sockets[-1].is_closed()
    violations.assert_none("switching chats")
    screenshot(page)

    # Back goes to the chat before (a page load: no stale copy of a live chat).
    page.go_back()
    expect(page.locator("#conversation-title")).to_have_value("Chat 03")
    page.context.close()


def test_desktop_sidebar_collapses_and_remembers_it(
    new_context: Callable[[], BrowserContext], sam: tuple[str, str]
) -> None:
    page = open_as(new_context, sam, DESKTOP)
    page.goto("/")
    sidebar = page.locator("#sidebar")
    toggle = page.get_by_role("button", name="Conversations")
    expect(sidebar).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")

    toggle.click()
    expect(sidebar).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    page.reload()
    expect(sidebar).to_be_hidden()  # remembered
    expect(page.locator("#composer textarea")).to_be_visible()

    toggle.click()
    expect(sidebar).to_be_visible()
    page.reload()
    expect(sidebar).to_be_visible()
    page.context.close()


def test_new_chat_creates_the_conversation_with_its_first_message(
    new_context: Callable[[], BrowserContext], llm: ScriptedLLM, screenshot: Screenshot
) -> None:
    page = open_as(new_context, ("alice", "alice-e2e-pw-7431"), DESKTOP)
    violations = Violations(page)
    page.goto("/c/new/")
    before = page.locator("#sidebar .conversation-row").count()
    # Opening new chats creates nothing.
    page.get_by_role("link", name="New chat").click()
    page.get_by_role("link", name="New chat").click()
    page.reload()
    expect(page.locator("#sidebar .conversation-row")).to_have_count(before)
    expect(page.locator("#messages")).to_have_count(0)
    box = page.locator("#composer textarea")
    expect(box).to_be_focused()

    llm.script({"chunks": ["A fresh ", "answer."], "chunk_delay": 0.2})
    page.evaluate(MARK)
    send(page, "Start something new")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    run_id = latest_run(page)
    wait_finished(page, run_id)
    expect(page.locator(f"#answer-{run_id}")).to_have_text("A fresh answer.")
    expect(page.locator("#messages .msg.user .content")).to_have_text("Start something new")
    expect(page.locator("#conversation-title")).to_have_value("Start something new")
    assert page.evaluate(SAME_PAGE)
    # The sidebar lists it at the top, as the open one.
    new_row = page.locator(f"#conversation-{chat_id(page)}")
    expect(new_row).to_have_class(re.compile(r"\bcurrent\b"))
    expect(page.locator("#sidebar .conversation-row").first).to_have_text(
        re.compile("Start something new")
    )
    # One conversation more (the first page holds at most PAGE_SIZE: earlier tests of the
    # session may have filled it), and only one with this message.
    rows = page.locator("#sidebar .conversation-row")
    expect(rows).to_have_count(min(before + 1, PAGE_SIZE))
    expect(rows.filter(has_text="Start something new")).to_have_count(1)
    violations.assert_none("starting a chat")
    screenshot(page)
    page.context.close()


def test_search_rename_archive_and_delete_from_the_sidebar(
    new_context: Callable[[], BrowserContext], dana: tuple[str, str]
) -> None:
    page = open_as(new_context, dana, DESKTOP)
    page.goto("/")
    rows = page.locator("#sidebar .conversation-row")
    expect(rows).to_have_count(4)

    search = page.get_by_label("Search conversations")
    search.fill("about delete")  # the message's text
    expect(rows).to_have_count(1)
    expect(rows).to_have_text(re.compile("Delete me"))
    search.fill("")
    expect(rows).to_have_count(4)

    renamed = row(page, "Rename me")
    renamed.get_by_label(re.compile("^Actions for")).click()
    renamed.get_by_label("New title").fill("Renamed in place")
    renamed.get_by_role("button", name="Rename").click()
    expect(row(page, "Renamed in place")).to_be_visible()
    expect(row(page, "Rename me")).to_have_count(0)

    row(page, "Archive me").get_by_label(re.compile("^Actions for")).click()
    row(page, "Archive me").get_by_role("button", name="Archive").click()
    expect(row(page, "Archive me")).to_have_count(0)

    doomed = row(page, "Delete me")
    doomed.get_by_label(re.compile("^Actions for")).click()
    page.once("dialog", lambda dialog: dialog.dismiss())
    doomed.get_by_role("button", name="Delete").click()
    expect(doomed).to_be_visible()  # not confirmed: nothing happens
    page.once("dialog", lambda dialog: dialog.accept())
    doomed.get_by_role("button", name="Delete").click()
    expect(row(page, "Delete me")).to_have_count(0)
    expect(rows).to_have_count(2)

    page.get_by_role("link", name="Archived").click()
    expect(rows).to_have_count(1)
    expect(rows).to_have_text(re.compile("Archive me"))
    row(page, "Archive me").get_by_label(re.compile("^Actions for")).click()
    row(page, "Archive me").get_by_role("button", name="Restore").click()
    expect(rows).to_have_count(0)
    page.get_by_role("link", name="Back to conversations").click()
    expect(rows).to_have_count(3)

    page.reload()  # all of it was saved
    titles = [text.strip() for text in rows.locator("a").all_inner_texts()]
    assert sorted(titles) == ["Archive me", "Keep me", "Renamed in place"], titles
    page.context.close()


def test_phone_sidebar_is_a_drawer(
    new_context: Callable[[], BrowserContext], sam: tuple[str, str], screenshot: Screenshot
) -> None:
    page = open_as(new_context, sam, PHONE)
    page.goto("/")
    sidebar = page.locator("#sidebar")
    menu = page.get_by_role("button", name="Conversations")
    expect(sidebar).to_be_hidden()
    expect(page.locator("#composer textarea")).to_be_visible()

    menu.click()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(sidebar).to_have_css("transform", "none")  # slid in all the way
    screenshot(page)
    page.mouse.click(PHONE["width"] - 15, PHONE["height"] // 2)  # tap outside it
    expect(sidebar).to_be_hidden()

    menu.click()
    expect(sidebar).to_be_visible()
    page.evaluate(MARK)
    row(page, "Chat 05").get_by_role("link").click()  # choosing a chat closes it
    expect(page.locator("#conversation-title")).to_have_value("Chat 05")
    expect(sidebar).to_be_hidden()
    assert page.evaluate(SAME_PAGE)
    expect(page.locator("#composer textarea")).to_be_visible()
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways on a phone: {width}px"
    page.context.close()
