"""Folders, pins and tags in the sidebar (issue 46), in real Chromium against daphne.

A user of this module's own (seeded through ``manage.py shell``, as tests/e2e/test_sidebar.py
does) creates a folder, drags a chat into it, pins one, tags one and filters by the tag;
all of it is still there after a reload. The keyboard's way (the row menu's Move to…) and a
folder closed across a reload are shown too.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from tests.e2e.conftest import ScriptedLLM
from tests.e2e.test_chat_flows import Screenshot
from tests.e2e.test_csp import Violations
from tests.e2e.test_sidebar import DESKTOP, open_as, row, seed

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fern(server_env: dict[str, str], app_server: str) -> tuple[str, str]:
    chats = [(name, 0) for name in ("Draft report", "Weekend plans", "Groceries", "Reading list")]
    seed(server_env, "folders-fern", "fern-e2e-pw-5521", chats)
    return "folders-fern", "fern-e2e-pw-5521"


def menu(page: Page, title: str) -> Locator:
    """The row's menu, opened."""
    the_row = row(page, title)
    the_row.get_by_label(re.compile("^Actions for")).click()
    return the_row


def folder(page: Page, name: str) -> Locator:
    """The folder's <li> (its own head names it: a parent's holds its sub-folders too)."""
    head = page.locator("#sidebar .folder-head").filter(
        has=page.get_by_role("button", name=name, exact=True)
    )
    return head.locator("xpath=..")


def titles(rows: Locator) -> list[str]:
    return [text.strip() for text in rows.locator("a[data-chat-link]").all_inner_texts()]


def test_folders_pins_and_tags_survive_a_reload(
    new_context: Callable[[], BrowserContext],
    fern: tuple[str, str],
    llm: ScriptedLLM,
    screenshot: Screenshot,
) -> None:
    page = open_as(new_context, fern, DESKTOP)
    violations = Violations(page)
    page.goto("/")
    sidebar = page.locator("#sidebar")
    expect(sidebar.locator(".conversation-row")).to_have_count(4)

    # A new folder, from the Folders heading's "+".
    sidebar.get_by_label("New folder", exact=True).click()
    sidebar.get_by_label("New folder's name").fill("Projects")
    sidebar.get_by_role("button", name="Create").click()
    projects = folder(page, "Projects")
    expect(projects).to_be_visible()
    toggle = projects.get_by_role("button", name="Projects", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(projects).to_contain_text("No chats here yet.")

    # A chat dragged onto it moves into it.
    row(page, "Draft report").get_by_role("link").drag_to(toggle)
    expect(projects.locator(".conversation-row")).to_have_count(1)
    expect(projects.locator(".conversation-row")).to_contain_text("Draft report")

    # The keyboard's way: the row menu's "Move to", here into a sub-folder.
    projects.get_by_label("Actions for folder Projects").click()
    projects.get_by_label("Sub-folder's name").fill("Archive box")
    projects.get_by_role("button", name="Add").click()
    box = folder(page, "Archive box")
    expect(box).to_be_visible()
    reading = menu(page, "Reading list")
    reading.get_by_label("Move to folder").select_option(label="Projects › Archive box")
    reading.get_by_role("button", name="Move").click()
    expect(box.locator(".conversation-row")).to_contain_text("Reading list")

    # Pinned: on top of the list.
    menu(page, "Weekend plans").get_by_role("button", name="Pin", exact=True).click()
    pinned = sidebar.locator("#pinned-rows .conversation-row")
    expect(pinned).to_have_count(1)
    expect(sidebar.locator(".conversation-row").first).to_contain_text("Weekend plans")

    # Tags, then the filter.
    groceries = menu(page, "Groceries")
    groceries.get_by_label("Tags, separated by commas").fill("Home, errands, home")
    groceries.get_by_role("button", name="Save tags").click()
    expect(row(page, "Groceries").locator(".tag")).to_have_text(["errands", "Home"])
    tagged = menu(page, "Weekend plans")
    tagged.get_by_label("Tags, separated by commas").fill("home")
    tagged.get_by_role("button", name="Save tags").click()
    expect(row(page, "Weekend plans").locator(".tag")).to_have_text(["Home"])

    sidebar.get_by_label("Filter by tag").select_option("errands")
    rows = sidebar.locator(".conversation-row")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("Groceries")
    sidebar.get_by_label("Filter by tag").select_option("Home")
    expect(rows).to_have_count(2)
    assert sorted(titles(rows)) == ["Groceries", "Weekend plans"]
    violations.assert_none("organising the sidebar")
    screenshot(page)

    # All of it was saved.
    page.reload()
    expect(sidebar.locator("#pinned-rows .conversation-row")).to_have_count(1)
    expect(sidebar.locator(".conversation-row").first).to_contain_text("Weekend plans")
    expect(folder(page, "Projects").locator(".conversation-row")).to_have_count(2)
    expect(folder(page, "Archive box").locator(".conversation-row")).to_contain_text("Reading list")
    expect(row(page, "Groceries").locator(".tag")).to_have_text(["errands", "Home"])
    sidebar.get_by_label("Filter by tag").select_option("errands")
    expect(rows).to_have_count(1)
    sidebar.get_by_label("Filter by tag").select_option(label="All tags")
    expect(rows).to_have_count(4)

    # A folder closed stays closed after a reload; its chats are hidden, not gone.
    toggle = folder(page, "Projects").get_by_role("button", name="Projects", exact=True)
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(row(page, "Draft report")).to_be_hidden()
    page.reload()
    toggle = folder(page, "Projects").get_by_role("button", name="Projects", exact=True)
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(row(page, "Draft report")).to_be_hidden()
    toggle.press("Enter")  # a real button: the keyboard opens it
    expect(row(page, "Draft report")).to_be_visible()

    # Dragged back onto the chats in no folder, it leaves the folder.
    row(page, "Draft report").get_by_role("link").drag_to(row(page, "Groceries"))
    expect(folder(page, "Projects").locator(":scope > ul > .conversation-row")).to_have_count(0)
    expect(sidebar.locator('ul[data-folder-drop=""] .conversation-row')).to_have_count(2)

    # Deleting the folder keeps its chats.
    projects = folder(page, "Projects")
    projects.get_by_label("Actions for folder Projects").click()
    page.once("dialog", lambda dialog: dialog.accept())
    projects.get_by_role("button", name="Delete folder").click()
    expect(folder(page, "Projects")).to_have_count(0)
    expect(sidebar.locator(".conversation-row")).to_have_count(4)
    violations.assert_none("after the reloads")
    page.context.close()
