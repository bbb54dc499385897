"""The sidebar's pinned chats, folders and tags (issue 46), as the browser receives them."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Folder
from conversations.organise import folders, pins, tags
from conversations.pages.sidebar import CLOSED_FOLDERS_COOKIE, PAGE_SIZE

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _no_launch(no_launch):
    """Runs are created, not executed."""


def make(owner, title: str, *, minutes_ago: int = 0) -> Conversation:
    conversation = services.conversation_create(owner=owner, title=title)
    moment = timezone.now() - dt.timedelta(minutes=minutes_ago)
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=moment)
    conversation.refresh_from_db()
    return conversation


def row_ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<li id="conversation-(\d+)"', html)]


def section(html: str, start: str, end: str) -> str:
    return html[html.index(start) : html.index(end, html.index(start))]


def test_pinned_first_then_folders_then_the_rest(user_client, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    clients = folders.folder_create(owner=user, name="Clients", parent_id=work.pk)
    loose = make(user, "Loose", minutes_ago=1)
    report = make(user, "Report", minutes_ago=2)
    acme = make(user, "Acme", minutes_ago=3)
    first_pin, last_pin = (
        make(user, "First pin", minutes_ago=4),
        make(user, "Last pin", minutes_ago=5),
    )
    folders.conversation_move(conversation=report, folder_id=work.pk)
    folders.conversation_move(conversation=acme, folder_id=clients.pk)
    folders.conversation_move(conversation=last_pin, folder_id=work.pk)  # pinned: shown there
    pins.conversation_pin(conversation=first_pin, pinned=True)
    pins.conversation_pin(conversation=last_pin, pinned=True)

    html = user_client.get("/").text

    # Every chat once: the pins (the last pinned first), the folders' chats, the rest.
    assert row_ids(html) == [last_pin.pk, first_pin.pk, acme.pk, report.pk, loose.pk]
    assert html.index(">Pinned</h3>") < html.index(">Folders</h3>")
    pinned = section(html, 'id="pinned-rows"', "</section>")
    assert row_ids(pinned) == [last_pin.pk, first_pin.pk] and ">Unpin</button>" in pinned
    # Folders are buttons that say whether they are open; a sub-folder sits inside its parent.
    toggle = re.search(
        rf'<button type="button" class="folder-toggle" aria-expanded="true" '
        rf'aria-controls="folder-{work.pk}-items" data-folder-toggle="{work.pk}">'
        rf'<span class="chevron" aria-hidden="true"></span>Work</button>',
        html,
    )
    assert toggle is not None
    work_items = section(html, f'id="folder-{work.pk}-items"', f'id="folder-{clients.pk}-items"')
    assert f'<li id="folder-{clients.pk}"' in work_items
    assert html.index(f'id="conversation-{acme.pk}"') < html.index(f'id="conversation-{report.pk}"')
    assert 'data-folder-drop=""' in html  # the chats in no folder: dropping there takes one out
    # Each row's menu moves it, sub-folders named under their parent.
    assert f'<option value="{clients.pk}">Work › Clients</option>' in html
    assert f'<option value="{work.pk}" selected>Work</option>' in html  # the Report row's
    # The headings of the list as before are still there for the rest.
    assert '<li class="group"><h3>Today</h3></li>' in html


def test_a_closed_folder_is_rendered_closed(user_client, user, chat_model):
    work, home = (folders.folder_create(owner=user, name=n) for n in ("Work", "Home"))
    user_client.cookies[CLOSED_FOLDERS_COOKIE] = f"{home.pk}.nonsense.99999999999999999999"

    html = user_client.get("/").text

    assert f'aria-controls="folder-{work.pk}-items"' in html
    assert re.search(rf'aria-expanded="false" aria-controls="folder-{home.pk}-items"', html)
    assert f'<ul id="folder-{home.pk}-items" class="folder-items" hidden>' in html
    assert f'<ul id="folder-{work.pk}-items" class="folder-items">' in html


def test_a_row_keeps_its_tab_stops_the_menu_holds_the_rest(user_client, user, chat_model):
    conversation = make(user, "Tagged")
    tags.conversation_set_tags(conversation=conversation, names=["urgent"])

    html = user_client.get("/").text

    row = re.search(rf'<li id="conversation-{conversation.pk}".*?\n</li>', html, re.S)[0]
    outside = re.sub(r"<details.*?</details>", "", row, flags=re.S)
    focusable = re.findall(r"<(a|button|input|select|textarea|summary)\b", outside)
    assert focusable == ["a"]  # and the menu's <summary>: two, as before
    assert row.count("<summary") == 1
    assert '<span class="tag">urgent</span>' in row  # shown, not focusable
    assert 'value="urgent" aria-label="Tags, separated by commas"' in row


def test_search_tag_and_archived_views_are_flat(user_client, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    filed = make(user, "Filed trip")
    pinned = make(user, "Pinned trip")
    folders.conversation_move(conversation=filed, folder_id=work.pk)
    pins.conversation_pin(conversation=pinned, pinned=True)
    tags.conversation_set_tags(conversation=filed, names=["Travel"])
    tags.conversation_set_tags(conversation=pinned, names=["travel"])

    for params in ({"q": "trip"}, {"tag": "TRAVEL"}):
        html = user_client.get("/c/list/", params, **HTMX).text
        assert sorted(row_ids(html)) == sorted([filed.pk, pinned.pk]), params
        assert ">Folders</h3>" not in html and 'id="pinned-rows"' not in html
    assert "No conversation is tagged “nope”." in user_client.get("/c/list/?tag=nope").text


def test_the_tag_filter_offers_the_tags_in_use(user_client, user, other_user, chat_model):
    assert 'id="sidebar-tag"' not in user_client.get("/").text  # no tags: no filter
    tags.conversation_set_tags(conversation=make(user, "a"), names=["Work", "home"])
    tags.conversation_set_tags(conversation=make(other_user, "theirs"), names=["secret"])

    html = user_client.get("/c/list/", {"tag": "work"}, **HTMX).text

    select = section(html, '<select id="sidebar-tag"', "</select>")
    assert 'hx-get="/c/list/" hx-trigger="change"' in select
    assert re.findall(r'<option value="([^"]*)"', select) == ["", "home", "Work"]
    assert '<option value="Work" selected>' in select and "secret" not in html
    # The search, the list's reload and the row menus carry the filter.
    page = user_client.get("/").text
    assert 'hx-include="#sidebar-archived, #sidebar-tag" aria-label="Search conversations"' in page
    assert 'hx-include="#sidebar-search, #sidebar-archived, #sidebar-tag"></div>' in page


def test_folders_are_created_renamed_and_deleted_from_the_sidebar(user_client, user, chat_model):
    response = user_client.post("/c/folders/new/", {"name": " Work "}, **HTMX)
    work = Folder.objects.get(owner=user)
    assert response.status_code == 200 and work.name == "Work"
    assert response.text.lstrip().startswith('<div id="conversation-list"')
    chevron = '<span class="chevron" aria-hidden="true"></span>'
    assert f'data-folder-toggle="{work.pk}">{chevron}Work</button>' in response.text
    error = '<div id="sidebar-error" class="error sidebar-error" role="alert" hx-swap-oob="true">'
    assert error + "</div>" in response.text  # an earlier refusal's words go

    sub = user_client.post("/c/folders/new/", {"name": "Clients", "parent": work.pk}, **HTMX)
    clients = Folder.objects.get(name="Clients")
    assert sub.status_code == 200 and clients.parent == work
    renamed = user_client.post(f"/c/folders/{clients.pk}/rename/", {"name": "Customers"}, **HTMX)
    assert "Customers</button>" in renamed.text

    chat = make(user, "Filed")
    folders.conversation_move(conversation=chat, folder_id=clients.pk)
    deleted = user_client.post(f"/c/folders/{work.pk}/delete/", **HTMX)
    assert deleted.status_code == 200 and not Folder.objects.exists()
    assert row_ids(deleted.text) == [chat.pk]  # kept, out of any folder
    assert Conversation.objects.get(pk=chat.pk).folder is None


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"name": "  "}, "A folder needs a name."),
        ({"name": "work"}, "You already have a folder named “work” at the top level."),
        ({"name": "Deeper", "parent": "SUB"}, "folders nest one level deep"),
        ({"name": "Nowhere", "parent": "abc"}, "You have no folder 0."),
    ],
)
def test_a_refused_folder_says_why_and_leaves_the_list(user_client, user, chat_model, data, words):
    work = folders.folder_create(owner=user, name="Work")
    sub = folders.folder_create(owner=user, name="Sub", parent_id=work.pk)
    if data.get("parent") == "SUB":
        data = {**data, "parent": sub.pk}

    response = user_client.post("/c/folders/new/", data, **HTMX)

    assert response.status_code == 422 and response["HX-Reswap"] == "none"
    assert words in response.text and 'id="sidebar-error"' in response.text
    assert 'id="conversation-list"' not in response.text
    assert Folder.objects.count() == 2


def test_moving_pinning_and_tagging_a_chat_answer_with_the_list(user_client, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    chat = make(user, "Chat")
    base = f"/c/{chat.pk}"

    moved = user_client.post(f"{base}/folder/", {"folder": work.pk}, **HTMX)
    assert moved.status_code == 200
    items = section(moved.text, f'id="folder-{work.pk}-items"', "</section>")
    assert row_ids(items) == [chat.pk]
    out = user_client.post(f"{base}/folder/", {"folder": ""}, **HTMX)
    assert 'data-folder-drop=""' in out.text and Conversation.objects.get(pk=chat.pk).folder is None

    pinned = user_client.post(f"{base}/pin/", {"pinned": "1"}, **HTMX)
    assert row_ids(section(pinned.text, 'id="pinned-rows"', "</section>")) == [chat.pk]
    unpinned = user_client.post(f"{base}/pin/", {"pinned": "0"}, **HTMX)
    assert 'id="pinned-rows"' not in unpinned.text

    tagged = user_client.post(f"{base}/tags/", {"tags": " Urgent, q3 ,urgent,, "}, **HTMX)
    assert '<span class="tag">q3</span><span class="tag">Urgent</span>' in tagged.text
    assert tags.tag_names(chat) == ["q3", "Urgent"]
    # The list comes back as the user saw it: filtered by the tag sent along.
    filtered = user_client.post(f"{base}/tags/", {"tags": "q3", "tag": "urgent"}, **HTMX)
    assert row_ids(filtered.text) == [] and "No conversation is tagged “urgent”." in filtered.text
    refused = user_client.post(
        f"{base}/tags/", {"tags": ",".join("t" * n for n in range(1, 23))}, **HTMX
    )
    assert refused.status_code == 422 and "at most 20 tags" in refused.text
    assert tags.tag_names(chat) == ["q3"]


def test_another_users_chats_and_folders_are_not_found(user_client, user, other_user, chat_model):
    mine = make(user, "Mine")
    theirs = make(other_user, "Theirs")
    their_folder = folders.folder_create(owner=other_user, name="Theirs")

    move = user_client.post(f"/c/{mine.pk}/folder/", {"folder": their_folder.pk}, **HTMX)
    assert move.status_code == 422 and f"You have no folder {their_folder.pk}." in move.text
    for url in (f"/c/{theirs.pk}/folder/", f"/c/{theirs.pk}/pin/", f"/c/{theirs.pk}/tags/"):
        assert user_client.post(url, {"folder": "", "tags": "x"}).status_code == 404, url
    for url in (f"/c/folders/{their_folder.pk}/rename/", f"/c/folders/{their_folder.pk}/delete/"):
        assert user_client.post(url, {"name": "Mine now"}).status_code == 404, url
    assert Folder.objects.get(pk=their_folder.pk).name == "Theirs"
    assert Conversation.objects.get(pk=theirs.pk).pinned_at is None
    assert ">Theirs</button>" not in user_client.get("/").text


def test_a_folders_next_page_loads_like_the_lists(user_client, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    made = [make(user, f"Chat {n}", minutes_ago=n) for n in range(PAGE_SIZE + 3)]
    Conversation.objects.update(folder=work)

    html = user_client.get("/").text
    items = section(html, f'id="folder-{work.pk}-items"', "</section>")
    assert row_ids(items) == [c.pk for c in made[:PAGE_SIZE]]
    more = re.search(r'<li class="more" hx-get="([^"]+)"', items)
    assert more is not None and f"folder={work.pk}" in more[1]

    rest = user_client.get(more[1].replace("&amp;", "&"), **HTMX).text
    assert row_ids(rest) == [c.pk for c in made[PAGE_SIZE:]]
    assert 'class="group"' not in rest and 'class="more"' not in rest
    assert "No other conversations." in html  # every chat is in the folder


def test_the_folders_cost_no_query_each(user_client, user, chat_model):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert user_client.get("/").status_code == 200
        return len(captured.captured_queries)

    folder = folders.folder_create(owner=user, name="F0")
    folders.conversation_move(conversation=make(user, "c0"), folder_id=folder.pk)
    queries()  # the first request caches what the next ones reuse
    one = queries()
    for n in range(1, 6):
        folder = folders.folder_create(owner=user, name=f"F{n}")
        folders.conversation_move(conversation=make(user, f"c{n}"), folder_id=folder.pk)
    assert queries() == one
