"""The conversations sidebar and the new-chat page, as the browser receives them."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from django.utils import timezone

from conversations import services
from conversations.models import Conversation, Message, Run
from conversations.pages.sidebar import PAGE_SIZE

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _no_launch(no_launch):
    """Runs are created, not executed."""


def make(owner, title: str, *, updated: dt.datetime | None = None, **fields) -> Conversation:
    conversation = services.conversation_create(owner=owner, title=title)
    values = {"updated_at": updated or timezone.now(), **fields}
    Conversation.objects.filter(pk=conversation.pk).update(**values)
    conversation.refresh_from_db()
    return conversation


def row_ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<li id="conversation-(\d+)"', html)]


def headings(html: str) -> list[str]:
    return re.findall(r'<li class="group"><h3>([^<]+)</h3>', html)


@pytest.mark.parametrize("url", ["/", "/c/new/"])
def test_new_chat_is_an_empty_composer_and_creates_no_conversation(user_client, chat_model, url):
    for _ in range(3):
        html = user_client.get(url).content.decode()

    assert not Conversation.objects.exists()
    assert 'id="composer"' in html and 'hx-post="/c/new/"' in html
    assert f'<option value="{chat_model.pk}" selected>' in html  # the model picker
    assert 'id="sidebar"' in html and "No conversations yet." in html


def test_the_first_message_creates_the_conversation_and_goes_to_it(user_client, user, chat_model):
    response = user_client.post("/c/new/", {"content": "Plan my trip"}, **HTMX)

    conversation = Conversation.objects.get()
    assert conversation.owner == user and conversation.title == "Plan my trip"
    assert list(conversation.messages.values_list("content", flat=True)) == ["Plan my trip"]
    assert Run.objects.filter(conversation=conversation).count() == 1
    location = json.loads(response["HX-Location"])
    assert location["path"] == f"/c/{conversation.pk}/" and location["select"] == "#main"
    assert response["HX-Trigger"] == "conversations-changed"  # the sidebar lists it
    # Without htmx, a plain redirect.
    plain = user_client.post("/c/new/", {"content": "Again"})
    assert plain.status_code == 302 and re.fullmatch(r"/c/\d+/", plain["Location"])


def test_a_refused_first_message_shows_why_and_creates_nothing(user_client, chat_model, settings):
    empty = user_client.post("/c/new/", {"content": "   "}, **HTMX)
    assert empty.status_code == 422 and "Type a message first." in empty.text
    assert empty["HX-Reswap"] == "none" and 'id="form-error"' in empty.text

    settings.AGENTSITE_MESSAGE_MAX_CHARS = 5
    too_long = user_client.post("/c/new/", {"content": "123456"}, **HTMX)
    assert too_long.status_code == 413 and "too long" in too_long.text
    assert not Conversation.objects.exists() and not Message.objects.exists()


def test_the_list_is_newest_first_grouped_by_day_in_the_current_time_zone(
    user_client, user, chat_model, settings
):
    settings.TIME_ZONE = "Pacific/Kiritimati"  # UTC+14: its day is not UTC's
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    older = make(user, "Older one", updated=midnight - dt.timedelta(days=30))
    week = make(user, "Last night", updated=midnight - dt.timedelta(minutes=1))
    today = make(user, "This morning", updated=midnight)  # never after "now", at any hour
    newest = make(user, "Just now")

    html = user_client.get("/").content.decode()

    assert row_ids(html) == [newest.pk, today.pk, week.pk, older.pk]
    assert headings(html) == ["Today", "Previous 7 days", "Older"]
    assert html.index("Previous 7 days") < html.index("Last night") < html.index("Older")


def test_the_next_page_loads_when_the_end_of_the_list_shows(user_client, user, chat_model):
    start = timezone.now()
    made = [make(user, f"Chat {n}", updated=start - dt.timedelta(seconds=n)) for n in range(55)]

    first = user_client.get("/").content.decode()
    more = re.search(r'<li class="more" hx-get="([^"]+)" hx-trigger="intersect once"', first)
    assert row_ids(first) == [c.pk for c in made[:PAGE_SIZE]] and more is not None

    second = user_client.get(more[1].replace("&amp;", "&"), **HTMX).content.decode()
    assert row_ids(second) == [c.pk for c in made[PAGE_SIZE:]]
    assert headings(second) == []  # still "Today": the heading is not repeated
    assert 'class="more"' not in second


def test_search_finds_titles_and_messages(user_client, user, chat_model):
    titled = make(user, "Trip to Lisbon")
    said = make(user, "Untitled chat")
    services.message_post(conversation=said, user=user, content="a trip to Porto?")
    make(user, "Groceries")

    response = user_client.get("/c/list/", {"q": "trip"}, **HTMX)

    assert sorted(row_ids(response.text)) == sorted([titled.pk, said.pk])
    assert response.text.lstrip().startswith('<div id="conversation-list"')
    nothing = user_client.get("/c/list/", {"q": "zebra"}, **HTMX).text
    assert "No conversation matches “zebra”." in nothing


def test_the_archived_view_lists_only_archived_conversations(user_client, user, chat_model):
    active = make(user, "Active")
    archived = make(user, "Put away", archived=True)

    html = user_client.get("/c/list/", {"archived": "1"}, **HTMX).text

    assert row_ids(html) == [archived.pk] and "Back to conversations" in html
    assert ">Restore</button>" in html
    assert row_ids(user_client.get("/").text) == [active.pk]


def test_the_open_conversation_is_highlighted(user_client, user, chat_model):
    other = make(user, "Other")
    open_one = make(user, "Open one")

    html = user_client.get(f"/c/{open_one.pk}/").content.decode()

    row = re.search(rf'<li id="conversation-{open_one.pk}" class="([^"]+)">\s*<a [^>]+>', html)
    assert row is not None and "current" in row[1] and 'aria-current="page"' in row[0]
    assert f'<li id="conversation-{other.pk}" class="conversation-row">' in html
    assert f'ws-connect="/ws/conversations/{open_one.pk}/' in html  # the chat itself


def test_rename_from_the_sidebar_answers_with_the_row(user_client, user, chat_model):
    conversation = make(user, "Old name")
    url = f"/c/{conversation.pk}/rename/"

    response = user_client.post(url, {"title": "New name", "next": "sidebar"}, **HTMX)

    assert row_ids(response.text) == [conversation.pk] and ">New name</a>" in response.text
    assert 'id="conversation-title"' not in response.text  # that chat is not open
    conversation.refresh_from_db()
    assert conversation.title == "New name"
    # The open chat's header shows the new title too.
    here = {"HTTP_HX_CURRENT_URL": f"http://testserver/c/{conversation.pk}/", **HTMX}
    response = user_client.post(url, {"title": "Newer", "next": "sidebar"}, **here)
    assert 'id="conversation-title" name="title" value="Newer"' in response.text
    refused = user_client.post(url, {"title": " ", "next": "sidebar"}, **HTMX)
    assert refused.status_code == 422 and "cannot be empty" in refused.text


def test_archive_and_delete_from_the_sidebar_remove_the_row(user_client, user, chat_model):
    kept, archived, deleted = make(user, "Kept"), make(user, "Archived"), make(user, "Deleted")

    response = user_client.post(
        f"/c/{archived.pk}/archive/", {"archived": "1", "next": "sidebar"}, **HTMX
    )
    assert response.status_code == 200 and response.content == b""
    response = user_client.post(f"/c/{deleted.pk}/delete/", {"next": "sidebar"}, **HTMX)
    assert response.status_code == 200 and response.content == b""
    assert "HX-Redirect" not in response  # the open chat (another one) stays

    assert row_ids(user_client.get("/").text) == [kept.pk]
    assert Conversation.objects.get(pk=archived.pk).archived
    assert not Conversation.objects.filter(pk=deleted.pk).exists()


def test_deleting_the_open_conversation_goes_to_a_new_chat(user_client, user, chat_model):
    conversation = make(user, "Open")
    here = {"HTTP_HX_CURRENT_URL": f"http://testserver/c/{conversation.pk}/", **HTMX}

    response = user_client.post(f"/c/{conversation.pk}/delete/", {"next": "sidebar"}, **here)

    assert response["HX-Redirect"] == "/"
    assert not Conversation.objects.exists()


def test_archiving_the_open_conversation_turns_its_header_button_into_restore(
    user_client, user, chat_model
):
    conversation = make(user, "Open")
    here = {"HTTP_HX_CURRENT_URL": f"http://testserver/c/{conversation.pk}/", **HTMX}

    response = user_client.post(
        f"/c/{conversation.pk}/archive/", {"archived": "1", "next": "sidebar"}, **here
    )

    page = response.text
    assert 'id="archive-form"' in page and 'hx-swap-oob="true"' in page
    assert ">Restore</button>" in page and 'name="archived" value="0"' in page


def test_the_sidebar_shows_only_the_users_own_conversations(
    user_client, user, other_user, chat_model
):
    mine = make(user, "Mine")
    theirs = make(other_user, "Theirs")

    for url in ("/", f"/c/{mine.pk}/", "/c/list/?q=e", "/c/list/?archived=1"):
        assert theirs.pk not in row_ids(user_client.get(url).text), url
