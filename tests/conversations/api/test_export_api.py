"""The API's export, import and shared links."""

from __future__ import annotations

import json

import pytest

from conversations.models import Conversation, Message, Run, SharedLink
from tests.conversations.api.conftest import JsonClient
from tests.conversations.branches.trees import build_tree
from tests.conversations.transfer.cited import ANSWER, NOTES, PNG, cited_chat

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(user):
    return build_tree(user)


def _counts() -> tuple[int, int, int]:
    return Conversation.objects.count(), Message.objects.count(), Run.objects.count()


def test_export_json_markdown_and_tree(api, tree):
    url = f"/api/conversations/{tree.conversation.pk}/export"

    branch = api.get(url)
    assert branch.status_code == 200
    assert branch["Content-Type"].startswith("application/json")
    assert branch["Content-Disposition"] == 'attachment; filename="trip-plan.json"'
    document = json.loads(branch.content)
    assert (document["format"], document["version"]) == ("agentsite.conversation", 1)
    assert len(document["runs"]) == 2

    whole = json.loads(api.get(url, tree="1").content)
    assert len(whole["runs"]) == 4 and whole["scope"] == "tree"

    markdown = api.get(url, format="markdown")
    assert markdown["Content-Type"].startswith("text/markdown")
    assert markdown["Content-Disposition"] == 'attachment; filename="trip-plan.md"'
    assert "New answer two" in markdown.content.decode()

    assert api.get(url, format="pdf").json()["fields"] == {"format": ["markdown or json"]}
    assert api.get(url, tree="yes").status_code == 400


def test_export_of_another_users_conversation_is_404(client, other_token, tree):
    bob = JsonClient(client, other_token)
    response = bob.get(f"/api/conversations/{tree.conversation.pk}/export")
    assert response.status_code == 404 and response.json() == {"error": "Not found."}


def test_import_round_trip_belongs_to_the_importing_user(api, client, other_token, tree):
    document = api.get(f"/api/conversations/{tree.conversation.pk}/export", tree="1").json()
    bob = JsonClient(client, other_token)

    response = bob.post("/api/conversations/import", document)

    assert response.status_code == 201
    body = response.json()
    assert response["Location"] == f"/api/conversations/{body['id']}"
    imported = Conversation.objects.get(pk=body["id"])
    assert imported.owner.username == "bob" and imported.title == "Trip plan"
    assert imported.messages.count() == 7 and imported.runs.count() == 4
    assert [m["content"] for m in body["messages"]] == [  # the selected branch
        "What is 17*3?",
        "Answer one",
        "And **why**?",
        "New answer two: **because**.\n\n- one\n- two",
    ]
    assert all(run["status"] == "succeeded" for run in body["runs"])
    # Alice does not see it.
    assert api.get(f"/api/conversations/{body['id']}").status_code == 404


def test_a_bad_import_is_400_with_the_reason_and_saves_nothing(api, tree):
    document = api.get(f"/api/conversations/{tree.conversation.pk}/export").json()
    before = _counts()

    response = api.post("/api/conversations/import", {**document, "version": 99})
    assert response.status_code == 400
    assert "Export version 99 is not supported" in response.json()["error"]

    document["messages"][-1]["run_id"] = 123456
    response = api.post("/api/conversations/import", document)
    assert response.status_code == 400
    assert "names a run the file does not hold" in response.json()["fields"]["file"][0]

    assert api.post("/api/conversations/import", "{").status_code == 400
    assert _counts() == before


def test_an_import_over_the_size_limit_is_413(api, tree, settings):
    document = api.get(f"/api/conversations/{tree.conversation.pk}/export").json()
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 200
    response = api.post("/api/conversations/import", document)
    assert response.status_code == 413
    assert "too large" in response.json()["error"]


def test_shares_create_list_and_revoke(api, client, tree):
    response = api.post(
        f"/api/conversations/{tree.conversation.pk}/shares", {"include_artifacts": False}
    )
    assert response.status_code == 201
    share = response.json()
    assert share["url"].startswith("http://testserver/s/") and share["active"] is True
    assert share["include_artifacts"] is False

    page = client.get(share["url"])
    assert page.status_code == 200 and "New answer two" in page.content.decode()

    listed = api.get("/api/shares").json()["shares"]
    assert [s["id"] for s in listed] == [share["id"]]
    assert api.get(f"/api/shares/{share['id']}").json()["url"] == share["url"]

    assert api.delete(f"/api/shares/{share['id']}").status_code == 204
    assert client.get(share["url"]).status_code == 404
    assert api.get("/api/shares").json()["shares"][0]["active"] is False
    assert api.delete(f"/api/shares/{share['id']}").status_code == 204  # idempotent


def test_shares_refuse_bad_input_and_other_users(api, client, other_token, tree):
    url = f"/api/conversations/{tree.conversation.pk}/shares"
    assert api.post(url, {"include_artifacts": "yes"}).status_code == 400
    assert api.post(url, {"public": True}).status_code == 400
    share = api.post(url).json()

    bob = JsonClient(client, other_token)
    assert bob.post(url).status_code == 404
    assert bob.get("/api/shares").json() == {"shares": []}
    assert bob.delete(f"/api/shares/{share['id']}").status_code == 404
    assert SharedLink.objects.get().is_active


# ------------------------------------------- cited passages and attached files (issue 45)


@pytest.fixture
def chat(user, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return cited_chat(user)


def test_a_share_copies_attached_files_only_with_include_files(api, client, chat):
    url = f"/api/conversations/{chat.conversation.pk}/shares"

    plain = api.post(url).json()
    assert (plain["include_files"], plain["include_artifacts"]) == (False, False)
    assert "notes.txt" not in client.get(plain["url"]).content.decode()

    response = api.post(url, {"include_files": True})
    assert response.status_code == 201
    shared = response.json()
    assert shared["include_files"] is True
    assert api.get(f"/api/shares/{shared['id']}").json()["include_files"] is True
    assert [s["include_files"] for s in api.get("/api/shares").json()["shares"]] == [True, False]
    page = client.get(shared["url"]).content.decode()
    token = shared["url"].rstrip("/").rsplit("/", 1)[1]
    assert '<span class="file-name">notes.txt</span>' in page
    assert client.get(f"/s/{token}/files/0/").content == NOTES
    # The answer's citations open the copies on the share, whoever reads it.
    assert f'href="/s/{token}/passages/0/"' in page and "/knowledge/passages/" not in page

    refused = api.post(url, {"include_files": "yes"})
    assert refused.status_code == 400 and "include_files" in refused.json()["fields"]


def test_the_openapi_document_describes_include_files(client):
    schemas = client.get("/api/schema").json()["components"]["schemas"]
    assert schemas["ShareNew"]["properties"]["include_files"]["type"] == "boolean"
    assert "include_files" in schemas["Share"]["required"]
    assert schemas["Share"]["properties"]["include_files"]["type"] == "boolean"


def test_exports_keep_citations_sources_and_file_references(api, client, other_token, chat):
    url = f"/api/conversations/{chat.conversation.pk}/export"

    document = api.get(url).json()
    question, answer = document["messages"]
    assert question["files"] == [
        {"name": "notes.txt", "size": len(NOTES), "content_type": "text/plain"},
        {"name": "chart.png", "size": len(PNG), "content_type": "image/png"},
    ]
    assert answer["content"] == ANSWER  # "[n]" as the model wrote them
    [run] = document["runs"]
    assert run["sources"] == [
        {"number": 1, "where": "handbook.pdf, page 3, Holidays"},
        {"number": 2, "where": "handbook.pdf, page 4, Holidays › Carry-over"},
        {"number": 3, "where": "handbook.pdf, page 9, Sick leave"},
    ]
    assert api.get(url, tree="1").json()["runs"][0]["sources"] == run["sources"]
    # Another user imports it: the answer and its "[n]" come along, the sources do not.
    imported = JsonClient(client, other_token).post("/api/conversations/import", document)
    assert imported.status_code == 201
    assert imported.json()["messages"][1]["content"] == ANSWER

    markdown = api.get(url, format="markdown").content.decode()
    assert "You get 25 days a year [1]; unused days carry over [2]." in markdown
    assert (
        "\n\n**Sources**\n\n[1] handbook.pdf, page 3, Holidays  \n"
        "[2] handbook.pdf, page 4, Holidays › Carry-over  \n"
        "[3] handbook.pdf, page 9, Sick leave  \n"
    ) in markdown
    assert "*Attached: notes.txt (36\xa0bytes)*" in markdown
    assert "<sup" not in markdown and "/knowledge/passages/" not in markdown
