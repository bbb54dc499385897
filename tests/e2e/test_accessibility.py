"""Accessibility as a checker and a keyboard user find it (issue 47).

axe-core (vendored, injected by tests/e2e/axe.py) reports no serious or critical
violation on any page: logged out and in, the admin's index, at desktop and phone widths,
in light and dark. A keyboard user meets a skip link first, one tab stop per chat of the
sidebar, and a visible focus outline on everything Tab reaches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from tests.e2e.axe import assert_accessible
from tests.e2e.conftest import ScriptedLLM, _manage, log_in
from tests.e2e.test_chat_flows import calculator_call, latest_run, send, wait_finished

pytestmark = pytest.mark.e2e

# Own users: the 30 chats of the keyboard test must not show in alice's sidebar.
CHECKER = ("ada", "ada-e2e-pw-4417")  # staff: the admin index is one of the pages
TYPIST = ("kit", "kit-e2e-pw-2093")
USERS_SCRIPT = """
from django.contrib.auth import get_user_model
User = get_user_model()
User.objects.create_superuser({checker!r}, password={checker_pw!r})
User.objects.create_user({typist!r}, password={typist_pw!r})
"""
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
SCHEMES = ("light", "dark")
CHATS = 30


def _csrf(page: Page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


@dataclass
class Site:
    """What the pages show: made once, through the site, as its user would."""

    state: dict[str, Any]  # the checker's logged-in cookies (Playwright storage state)
    chat: int  # a conversation with a finished answer and a tool card
    share: str  # the /s/<token>/ path of its shared link
    preset: int
    base: int  # a knowledge base


@pytest.fixture(scope="module")
def site(
    new_context: Callable[..., BrowserContext],
    server_env: dict[str, str],
    scripted_server: ScriptedLLM,
) -> Iterator[Site]:
    checker, checker_pw = CHECKER
    typist, typist_pw = TYPIST
    _manage(
        server_env,
        "shell",
        "-c",
        USERS_SCRIPT.format(
            checker=checker, checker_pw=checker_pw, typist=typist, typist_pw=typist_pw
        ),
    )
    context = new_context()
    page = context.new_page()
    log_in(page, checker, checker_pw)

    # A tool card, and a code block with its Copy button.
    answer = ["It is **42**:\n\n", "```python\nprint(6 * 7)\n```\n"]
    scripted_server.script(calculator_call("6*7"), {"chunks": answer})
    page.goto("/")
    send(page, "What is 6 times 7?")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    wait_finished(page, latest_run(page))
    expect(page.locator("details.tool-card")).to_have_count(1)
    expect(page.locator(".answer .copy-code")).to_have_count(1)
    chat = int(re.findall(r"/c/(\d+)/$", page.url)[0])

    response = page.request.post(
        f"/api/conversations/{chat}/shares", data={}, headers={"X-CSRFToken": _csrf(page)}
    )
    assert response.status == 201, response.text()
    share = re.sub(r"^https?://[^/]+", "", response.json()["url"])

    page.goto("/presets/")
    form = page.locator("form.preset-form")
    form.get_by_label("Name").fill("Proofreader")
    form.get_by_label("System prompt").fill("Correct the spelling.")
    form.get_by_role("button", name="Create preset").click()
    card = page.locator(".preset-card").filter(has_text="Proofreader")
    edit = card.get_by_role("link", name="Edit")
    preset = int(re.findall(r"/presets/(\d+)/", edit.get_attribute("href") or "")[0])

    page.goto("/knowledge/")
    page.get_by_label("Name").fill("Lighthouses")
    page.get_by_role("button", name="Create knowledge base").click()
    expect(page.get_by_role("heading", name="Lighthouses")).to_be_visible()
    base = int(re.findall(r"/knowledge/(\d+)/", page.url)[0])

    page.goto("/settings/tokens/")
    page.get_by_label("Name").fill("nightly report")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token-value")).to_be_visible()

    state = context.storage_state()
    context.close()
    yield Site(state=state, chat=chat, share=share, preset=preset, base=base)


# name -> (path, logged in?, what to do once it is loaded)
def _open_chat_settings(page: Page) -> None:
    page.get_by_label("Settings of this chat").click()
    expect(page.locator(".chat-settings-form")).to_be_visible()


PAGES: dict[str, tuple[str, bool, Callable[[Page], None] | None]] = {
    "login": ("/accounts/login/", False, None),
    "share": ("{share}", False, None),
    "new-chat": ("/", True, None),
    "conversation": ("/c/{chat}/", True, None),
    "chat-settings": ("/c/{chat}/", True, _open_chat_settings),
    "settings": ("/settings/", True, None),
    "presets": ("/presets/", True, None),
    "preset-edit": ("/presets/{preset}/", True, None),
    "api-tokens": ("/settings/tokens/", True, None),
    "shared-links": ("/settings/shares/", True, None),
    "knowledge": ("/knowledge/", True, None),
    "knowledge-base": ("/knowledge/{base}/", True, None),
    "usage": ("/usage/", True, None),
    "admin": ("/admin/", True, None),
}


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("name", list(PAGES))
def test_axe_finds_no_serious_violation(
    site: Site,
    new_context: Callable[..., BrowserContext],
    name: str,
    size: str,
    scheme: str,
) -> None:
    path, logged_in, then = PAGES[name]
    options: dict[str, Any] = {"viewport": SIZES[size], "color_scheme": scheme}
    if size == "phone":
        options.update(has_touch=True, is_mobile=True)
    if logged_in:
        options["storage_state"] = site.state
    context = new_context(**options)
    try:
        page = context.new_page()
        response = page.goto(path.format(**vars(site)))
        assert response is not None and response.status == 200, (path, response)
        page.wait_for_load_state("load")
        if then is not None:
            then(page)
        assert_accessible(page, f"{name} ({size}, {scheme})")
    finally:
        context.close()


# ------------------------------------------------------------------------- keyboard

FOCUS_STATE = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const style = getComputedStyle(el);
  const outlined = style.outlineStyle !== "none" && parseFloat(style.outlineWidth) > 0;
  return {
    tag: el.tagName.toLowerCase(),
    id: el.id,
    text: (el.getAttribute("aria-label") || el.textContent || el.name || "").trim().slice(0, 40),
    row: !!el.closest(".conversation-row"),
    composer: !!el.closest("#composer") && el.tagName === "TEXTAREA",
    visible: outlined || (style.boxShadow !== "none" && style.boxShadow !== ""),
  };
}"""


@pytest.fixture(scope="module")
def typist(site: Site, new_context: Callable[..., BrowserContext]) -> Iterator[BrowserContext]:
    """The typist's browser, with ``CHATS`` conversations in the sidebar."""
    context = new_context()
    page = context.new_page()
    log_in(page, *TYPIST)
    for number in range(CHATS):
        response = page.request.post(
            "/api/conversations",
            data={"title": f"Chat number {number + 1}"},
            headers={"X-CSRFToken": _csrf(page)},
        )
        assert response.status == 201, response.text()
    page.close()
    yield context
    context.close()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_keyboard_skip_link_one_stop_per_chat_and_visible_focus(
    typist: BrowserContext, scheme: str
) -> None:
    page = typist.new_page()
    page.emulate_media(color_scheme=scheme)
    # The skip link is a page's first stop, and moves the focus to the main column.
    page.goto("/settings/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    first = page.evaluate(FOCUS_STATE)
    assert first["visible"], first
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.getElementById('main').contains(document.activeElement)")

    # A chat page puts the focus in its message box; from the skip link before it, Tab by
    # Tab past the header and the sidebar back to the message box.
    page.goto("/")
    expect(page.locator("#sidebar .conversation-row")).to_have_count(CHATS)
    expect(page.locator("#composer textarea")).to_be_focused()
    skip.focus()
    expect(skip).to_be_focused()
    stops: list[dict[str, Any]] = []
    for _ in range(CHATS * 2 + 20):
        page.keyboard.press("Tab")
        state = page.evaluate(FOCUS_STATE)
        assert state is not None, f"the focus left the page after {stops}"
        stops.append(state)
        if state["composer"]:
            break
    else:
        pytest.fail(f"no Tab reached the message box: {[s['text'] for s in stops]}")
    unmarked = [s for s in stops if not s["visible"]]
    assert not unmarked, f"focused without a visible outline: {unmarked}"
    assert sum(s["row"] for s in stops) == CHATS, [s["text"] for s in stops if s["row"]]
    assert len(stops) <= CHATS + 22, [s["text"] for s in stops]
    page.close()


def test_a_rows_menu_opens_from_its_link_and_closes_back_to_it(typist: BrowserContext) -> None:
    page = typist.new_page()
    page.goto("/")
    row = page.locator("#sidebar .conversation-row").first
    link = row.locator("a[data-chat-link]")
    link.focus()
    page.keyboard.press("ArrowRight")
    menu = row.locator("details.row-menu")
    expect(menu).to_have_attribute("open", "")
    expect(menu.get_by_label("New title")).to_be_focused()
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")
    expect(link).to_be_focused()
    # Up and down walk the rows.
    page.keyboard.press("ArrowDown")
    second = page.locator("#sidebar .conversation-row").nth(1)
    expect(second.locator("a[data-chat-link]")).to_be_focused()
    page.keyboard.press("ArrowUp")
    expect(link).to_be_focused()
    page.close()
