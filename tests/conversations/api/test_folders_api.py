"""Folders, tags and pins through the JSON API (issue 46): each endpoint, its refusals
(400 naming the field), and 404 for another user's folder or conversation."""

from __future__ import annotations

import pytest

from conversations.models import Conversation, Folder, Tag
from conversations.organise import folders, pins, tags
from conversations.services import conversation_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def theirs(other_user) -> Folder:
    return folders.folder_create(owner=other_user, name="Theirs")


def titles(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [c["title"] for c in response.json()["conversations"]]


# --------------------------------------------------------------------------- folders


def test_folders_are_created_listed_read_changed_and_deleted(api, user):
    created = api.post("/api/folders", {"name": " Work "})
    assert created.status_code == 201
    work = created.json()
    assert work["name"] == "Work" and work["parent"] is None and work["conversation_count"] == 0
    sub = api.post("/api/folders", {"name": "Clients", "parent": work["id"]}).json()
    assert sub["parent"] == work["id"]
    chat = conversation_create(owner=user, title="filed")
    folders.conversation_move(conversation=chat, folder_id=sub["id"])

    listed = api.get("/api/folders").json()
    assert [(f["name"], f["parent"], f["conversation_count"]) for f in listed] == [
        ("Clients", work["id"], 1),
        ("Work", None, 0),
    ]
    assert api.get(f"/api/folders/{sub['id']}").json()["conversation_count"] == 1

    renamed = api.patch(f"/api/folders/{sub['id']}", {"name": "Customers", "parent": None})
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Customers" and renamed.json()["parent"] is None
    moved_back = api.patch(f"/api/folders/{sub['id']}", {"parent": work["id"]})
    assert moved_back.json()["parent"] == work["id"] and moved_back.json()["name"] == "Customers"

    assert api.delete(f"/api/folders/{work['id']}").status_code == 204
    assert not Folder.objects.exists()
    assert Conversation.objects.get(pk=chat.pk).folder is None  # kept, out of any folder


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({}, "name", "'name' is required."),
        ({"name": "   "}, "name", "A folder needs a name."),
        ({"name": "x" * 101}, "name", "at most 100 characters"),
        ({"name": 5}, "name", "'name' must be a string."),
        ({"name": "Work"}, "name", "You already have a folder named “Work” at the top level."),
        ({"name": "Deeper", "parent": "SUB"}, "parent", "folders nest one level deep"),
        ({"name": "x", "parent": True}, "parent", "'parent' must be a whole number."),
        ({"name": "x", "colour": "red"}, "colour", "Unknown field(s): colour."),
    ],
)
def test_a_refused_folder_is_a_400_naming_the_field(api, user, body, field, words):
    work = folders.folder_create(owner=user, name="work")
    sub = folders.folder_create(owner=user, name="Sub", parent_id=work.pk)
    if body.get("parent") == "SUB":
        body = {**body, "parent": sub.pk}

    response = api.post("/api/folders", body)

    assert response.status_code == 400, response.content
    assert words in response.json()["error"] and field in response.json()["fields"]
    assert Folder.objects.count() == 2


def test_changing_a_folder_is_refused_with_reasons(api, user):
    work = folders.folder_create(owner=user, name="Work")
    home = folders.folder_create(owner=user, name="Home")
    folders.folder_create(owner=user, name="Sub", parent_id=work.pk)

    nothing = api.patch(f"/api/folders/{work.pk}", {})
    assert nothing.status_code == 400 and "Nothing to change" in nothing.json()["error"]
    holder = api.patch(f"/api/folders/{work.pk}", {"parent": home.pk})
    assert holder.status_code == 400 and "has sub-folders" in holder.json()["error"]
    itself = api.patch(f"/api/folders/{home.pk}", {"parent": home.pk})
    assert itself.status_code == 400 and "inside itself" in itself.json()["fields"]["parent"][0]
    taken = api.patch(f"/api/folders/{home.pk}", {"name": "WORK"})
    assert taken.status_code == 400 and "name" in taken.json()["fields"]
    assert Folder.objects.get(pk=home.pk).name == "Home"


def test_another_users_folder_is_a_404(api, user, theirs):
    for response in (
        api.get(f"/api/folders/{theirs.pk}"),
        api.patch(f"/api/folders/{theirs.pk}", {"name": "Mine"}),
        api.delete(f"/api/folders/{theirs.pk}"),
        api.post("/api/folders", {"name": "Inside", "parent": theirs.pk}),
        api.get("/api/conversations", folder=str(theirs.pk)),
    ):
        assert response.status_code == 404, response.content
    assert api.get("/api/folders").json() == []
    theirs.refresh_from_db()
    assert theirs.name == "Theirs" and not Folder.objects.filter(owner=user).exists()


def test_folders_need_credentials(anon_api, theirs):
    assert anon_api.get("/api/folders").status_code == 401
    assert anon_api.post("/api/folders", {"name": "x"}).status_code == 401
    assert anon_api.delete(f"/api/folders/{theirs.pk}").status_code == 401


# ---------------------------------------------------------------- conversations' fields


def test_a_conversation_is_created_in_a_folder_tagged_and_pinned(api, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")

    response = api.post(
        "/api/conversations", {"title": "Plan", "folder": work.pk, "tags": ["Q3", "q3", " urgent "],
                               "pinned": True},
    )  # fmt: skip

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["folder"] == work.pk and body["tags"] == ["Q3", "urgent"] and body["pinned"]
    plain = api.post("/api/conversations", {}).json()
    assert plain["folder"] is None and plain["tags"] == [] and plain["pinned"] is False


def test_a_refused_create_creates_nothing(api, user, theirs, chat_model):
    not_mine = api.post("/api/conversations", {"title": "x", "folder": theirs.pk})
    assert not_mine.status_code == 404 and "folder" in not_mine.json()["fields"]
    too_many = api.post("/api/conversations", {"tags": [f"t{n}" for n in range(21)]})
    assert too_many.status_code == 400 and "tags" in too_many.json()["fields"]
    assert not Conversation.objects.exists() and not Tag.objects.exists()


def test_patch_moves_tags_and_pins(api, user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    chat = conversation_create(owner=user, title="Chat")
    url = f"/api/conversations/{chat.pk}"

    changed = api.patch(url, {"folder": work.pk, "tags": ["b", "A"], "pinned": True}).json()
    assert changed["folder"] == work.pk and changed["tags"] == ["A", "b"] and changed["pinned"]
    assert api.get(url).json()["tags"] == ["A", "b"]

    cleared = api.patch(url, {"folder": None, "tags": [], "pinned": False}).json()
    assert cleared["folder"] is None and cleared["tags"] == [] and not cleared["pinned"]
    assert not Tag.objects.exists()  # no chat has them any longer


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        ({"tags": ["x" * 33]}, 400, "tags", "at most 32 characters"),
        ({"tags": [f"t{n}" for n in range(21)]}, 400, "tags", "at most 20 tags"),
        ({"tags": "work"}, 400, "tags", "tags"),
        ({"tags": None}, 400, "tags", "tags"),
        ({"tags": [1]}, 400, "tags.0", "must be a string"),
        ({"pinned": "yes"}, 400, "pinned", "'pinned' must be true or false."),
        ({"folder": "1"}, 400, "folder", "'folder' must be a whole number."),
        ({"folder": 999999}, 404, "folder", "You have no folder 999999."),
    ],
)
def test_patch_refusals_name_the_field_and_change_nothing(
    api, user, chat_model, body, status, field, words
):
    chat = conversation_create(owner=user, title="Chat")
    tags.conversation_set_tags(conversation=chat, names=["kept"])
    # Given together with a valid title, so "all of the changes or none" shows too.
    response = api.patch(f"/api/conversations/{chat.pk}", {"title": "Renamed", **body})

    assert response.status_code == status, response.content
    assert words in response.json()["error"] and field in response.json()["fields"]
    chat.refresh_from_db()
    assert chat.title == "Chat" and tags.tag_names(chat) == ["kept"]


def test_another_users_conversation_is_a_404_and_their_folder_too(
    api, user, other_user, theirs, chat_model
):
    their_chat = conversation_create(owner=other_user, title="theirs")
    mine = conversation_create(owner=user, title="mine")

    assert api.patch(f"/api/conversations/{their_chat.pk}", {"pinned": True}).status_code == 404
    into_theirs = api.patch(f"/api/conversations/{mine.pk}", {"folder": theirs.pk})
    assert into_theirs.status_code == 404 and "folder" in into_theirs.json()["fields"]
    assert Conversation.objects.get(pk=their_chat.pk).pinned_at is None
    assert Conversation.objects.get(pk=mine.pk).folder is None


# --------------------------------------------------------------------------- filters


def test_the_list_filters_by_tag_folder_and_pin(api, user, other_user, chat_model):
    work = folders.folder_create(owner=user, name="Work")
    report, trip = (
        conversation_create(owner=user, title="report"),
        conversation_create(owner=user, title="trip"),
    )
    conversation_create(owner=user, title="loose")
    folders.conversation_move(conversation=report, folder_id=work.pk)
    tags.conversation_set_tags(conversation=report, names=["Urgent"])
    tags.conversation_set_tags(conversation=trip, names=["urgent", "travel"])
    pins.conversation_pin(conversation=trip, pinned=True)
    their = conversation_create(owner=other_user, title="theirs")
    tags.conversation_set_tags(conversation=their, names=["urgent"])

    assert sorted(titles(api.get("/api/conversations", tag="URGENT"))) == ["report", "trip"]
    assert titles(api.get("/api/conversations", folder=str(work.pk))) == ["report"]
    assert sorted(titles(api.get("/api/conversations", folder="none"))) == ["loose", "trip"]
    assert titles(api.get("/api/conversations", pinned="true")) == ["trip"]
    assert sorted(titles(api.get("/api/conversations", pinned="0"))) == ["loose", "report"]
    assert titles(api.get("/api/conversations", tag="urgent", folder="none")) == ["trip"]
    assert titles(api.get("/api/conversations", tag="nothing")) == []
    page = api.get("/api/conversations", tag="urgent").json()
    assert page["count"] == 2
    listed = {c["title"]: c for c in page["conversations"]}
    assert listed["trip"]["tags"] == ["travel", "Urgent"]  # as first typed
    assert listed["trip"]["pinned"]
    assert listed["report"]["folder"] == work.pk

    bad = api.get("/api/conversations", folder="work")
    assert bad.status_code == 400 and bad.json()["fields"] == {
        "folder": ["'folder' must be a folder's id or none."]
    }
    assert api.get("/api/conversations", folder="9" * 30).status_code == 400


def test_the_schema_documents_the_operations(api):
    schema = api.get("/api/schema").json()
    operations = {
        (method, path): operation["operationId"]
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    }
    assert operations[("get", "/api/folders")] == "listFolders"
    assert operations[("post", "/api/folders")] == "createFolder"
    assert operations[("patch", "/api/folders/{folder_id}")] == "updateFolder"
    assert operations[("delete", "/api/folders/{folder_id}")] == "deleteFolder"
    listing = schema["paths"]["/api/conversations"]["get"]["parameters"]
    assert {"tag", "folder", "pinned"} <= {p["name"] for p in listing}
    conversation = schema["components"]["schemas"]["Conversation"]["properties"]
    assert {"folder", "tags", "pinned"} <= set(conversation)
