"""Each JSON endpoint: success, validation (400 with fields), 404 for others' ids, 413."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group
from django.test import override_settings

from conversations.models import Conversation, Message, Run
from conversations.services import conversation_create, message_create
from tests.conftest import PROVIDER_KEY

pytestmark = pytest.mark.django_db


@pytest.fixture
def mine(user, chat_model):
    return conversation_create(owner=user, title="mine")


@pytest.fixture
def theirs(other_user, chat_model):
    return conversation_create(owner=other_user, title="theirs")


def counts() -> tuple[int, int, int]:
    return Conversation.objects.count(), Message.objects.count(), Run.objects.count()


# ------------------------------------------------------------------ conversations


def test_list_shows_only_own_conversations(api, mine, theirs):
    response = api.get("/api/conversations")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 1
    [item] = body["conversations"]
    assert item["id"] == mine.pk and item["title"] == "mine"
    assert item["model"]["name"] == "Scripted"
    assert item["events_url"] == f"/api/conversations/{mine.pk}/events"


def test_list_search_archived_and_paging(api, user):
    for title in ("alpha", "beta", "gamma"):
        conversation_create(owner=user, title=title)
    archived = conversation_create(owner=user, title="old")
    archived.archived = True
    archived.save()

    assert [c["title"] for c in api.get("/api/conversations", q="bet").json()["conversations"]] == [
        "beta"
    ]
    assert [c["title"] for c in api.get("/api/conversations", archived="1").json()[
        "conversations"
    ]] == ["old"]  # fmt: skip
    page = api.get("/api/conversations", limit="2", offset="1").json()
    assert page["count"] == 3 and len(page["conversations"]) == 2
    bad = api.get("/api/conversations", limit="many")
    assert bad.status_code == 400 and "limit" in bad.json()["fields"]


def test_create_with_defaults_title_and_model(api, user, chat_model):
    response = api.post("/api/conversations", {})
    assert response.status_code == 201
    body = response.json()
    assert body["title"] == "" and body["model"]["id"] == chat_model.pk
    assert body["messages"] == [] and body["runs"] == []
    assert response["Location"] == f"/api/conversations/{body['id']}"

    named = api.post("/api/conversations", {"title": "Trip", "model": chat_model.pk})
    assert named.status_code == 201 and named.json()["title"] == "Trip"
    assert Conversation.objects.filter(owner=user).count() == 2


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": 5}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"model": 999_999}, "model"),
        ({"model": "abc"}, "model"),
        ({"model": True}, "model"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_create_validation_errors(api, chat_model, body, field):
    response = api.post("/api/conversations", body)
    assert response.status_code == 400
    assert field in response.json()["fields"] and response.json()["error"]
    assert not Conversation.objects.exists()


def test_create_refuses_a_model_the_user_may_not_use(api, chat_model):
    chat_model.allowed_groups.add(Group.objects.create(name="staff-only"))
    response = api.post("/api/conversations", {"model": chat_model.pk})
    assert response.status_code == 400 and "model" in response.json()["fields"]


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", '"text"', b"\xff\xfe"])
def test_invalid_json_is_400(api, raw):
    response = api.post("/api/conversations", raw)
    assert response.status_code == 400
    assert "error" in response.json() and "fields" in response.json()
    assert not Conversation.objects.exists()


def test_detail_has_messages_pins_runs_and_summaries(api, mine, user):
    message_create(conversation=mine, role="user", content="hello", pinned=True)
    message_create(conversation=mine, role="assistant", content="hi")
    run = Run.objects.create(conversation=mine, status=Run.Status.SUCCEEDED, iterations=1)

    response = api.get(f"/api/conversations/{mine.pk}")

    assert response.status_code == 200
    body = response.json()
    assert [(m["role"], m["content"], m["pinned"]) for m in body["messages"]] == [
        ("user", "hello", True),
        ("assistant", "hi", False),
    ]
    assert [(r["id"], r["status"]) for r in body["runs"]] == [(run.pk, "succeeded")]
    assert body["active_run_id"] is None
    assert body["compaction_summaries"] == []


def test_detail_includes_compaction_summaries(api, mine):
    from conversations import models

    summary_model = getattr(models, "CompactionSummary", None)
    if summary_model is None:
        pytest.skip("CompactionSummary is not in this checkout yet")
    summary_model.objects.create(
        conversation=mine, summary="Earlier: greetings.", covers_up_to_seq=4,
        original_count=6, kept_count=2,
    )  # fmt: skip
    [out] = api.get(f"/api/conversations/{mine.pk}").json()["compaction_summaries"]
    assert out["summary"] == "Earlier: greetings." and out["covers_up_to_seq"] == 4
    assert "conversation" not in out and "conversation_id" not in out


def test_detail_of_someone_elses_conversation_is_404(api, theirs):
    for method in ("get", "delete"):
        response = getattr(api, method)(f"/api/conversations/{theirs.pk}")
        assert response.status_code == 404 and response.json() == {"error": "Not found."}
    response = api.patch(f"/api/conversations/{theirs.pk}", {"title": "mine now"})
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.title == "theirs"
    assert api.get("/api/conversations/999999").status_code == 404


def test_patch_renames_archives_and_switches_model(api, mine, chat_model):
    response = api.patch(f"/api/conversations/{mine.pk}", {"title": "  Renamed "})
    assert response.status_code == 200 and response.json()["title"] == "Renamed"
    response = api.patch(
        f"/api/conversations/{mine.pk}", {"archived": True, "model": chat_model.pk}
    )
    assert response.status_code == 200 and response.json()["archived"] is True
    mine.refresh_from_db()
    assert mine.title == "Renamed" and mine.archived


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "   "}, "title"),
        ({"title": None}, "title"),
        ({}, "__all__"),
        ({"archived": "yes"}, "archived"),
        ({"model": 424242}, "model"),
        ({"owner": 2}, "owner"),
    ],
)
def test_patch_validation_errors(api, mine, body, field):
    response = api.patch(f"/api/conversations/{mine.pk}", body)
    assert response.status_code == 400
    assert field in response.json()["fields"]
    mine.refresh_from_db()
    assert mine.title == "mine" and not mine.archived


def test_delete(api, mine):
    response = api.delete(f"/api/conversations/{mine.pk}")
    assert response.status_code == 204
    assert not Conversation.objects.filter(pk=mine.pk).exists()


# ------------------------------------------------------------------ messages and runs


def test_post_message_starts_a_run_then_injects(api, mine):
    response = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "Hi there"})

    assert response.status_code == 202
    body = response.json()
    message = Message.objects.get(pk=body["message_id"])
    assert message.content == "Hi there" and message.conversation == mine
    assert body["injected"] is False and body["run_status"] == "queued"
    assert Run.objects.get(pk=body["run_id"]).trigger_message == message

    followup = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "and also"})
    assert followup.status_code == 202
    assert followup.json()["injected"] is True and followup.json()["run_id"] == body["run_id"]
    assert api.get(f"/api/conversations/{mine.pk}").json()["active_run_id"] == body["run_id"]


@pytest.mark.parametrize(
    "body", [{}, {"content": ""}, {"content": "   "}, {"content": 42}, {"content": "x", "y": 1}]
)
def test_post_message_validation(api, mine, body):
    before = counts()
    response = api.post(f"/api/conversations/{mine.pk}/messages", body)
    assert response.status_code == 400
    assert response.json()["fields"]
    assert counts() == before


@override_settings(AGENTSITE_MESSAGE_MAX_CHARS=50)
def test_oversized_message_is_413_and_saves_nothing(api, mine):
    before = counts()
    response = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "x" * 51})
    assert response.status_code == 413
    assert "content" in response.json()["fields"]
    assert counts() == before
    assert (
        api.post(f"/api/conversations/{mine.pk}/messages", {"content": "x" * 50}).status_code == 202
    )


@override_settings(AGENTSITE_MESSAGE_MAX_CHARS=10)
def test_oversized_body_is_refused_before_parsing(api, mine, monkeypatch):
    from conversations.http import body as api_module

    def parse_refused(*args, **kwargs):
        raise AssertionError("the body must not be parsed")

    limit = api_module.body_max_bytes()
    before = counts()
    body = json.dumps({"content": "y" * limit})
    with monkeypatch.context() as patched:
        patched.setattr(api_module, "loads_storable", parse_refused)
        response = api.post(f"/api/conversations/{mine.pk}/messages", body)
    assert response.status_code == 413
    assert "too large" in response.json()["error"]
    assert counts() == before


def test_post_message_to_someone_elses_conversation_is_404(api, theirs):
    before = counts()
    response = api.post(f"/api/conversations/{theirs.pk}/messages", {"content": "hi"})
    assert response.status_code == 404
    assert counts() == before


def test_cancel_run(api, mine, theirs, other_user):
    run_id = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "go"}).json()["run_id"]

    response = api.post(f"/api/runs/{run_id}/cancel")

    assert response.status_code == 202
    assert response.json()["cancel_requested"] is True
    assert response.json()["status"] == "cancelled"  # queued and not started: stopped at once
    other_run = Run.objects.create(conversation=theirs)
    assert api.post(f"/api/runs/{other_run.pk}/cancel").status_code == 404
    other_run.refresh_from_db()
    assert not other_run.cancel_requested
    assert api.post("/api/runs/999999/cancel").status_code == 404


def test_retry_a_failed_run(api, mine, theirs):
    """The API's Retry: a failed, stopped or incomplete run's question is answered again
    by a new run beside it; anything else is refused in plain words."""
    run_id = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "go"}).json()["run_id"]
    assert api.post(f"/api/runs/{run_id}/retry").status_code == 400  # still queued
    Run.objects.filter(pk=run_id).update(status=Run.Status.FAILED, error="The model failed.")

    response = api.post(f"/api/runs/{run_id}/retry")

    assert response.status_code == 202
    retry = response.json()
    assert retry["id"] != run_id and retry["status"] == "queued"
    assert Run.objects.get(pk=retry["id"]).trigger_message_id == (
        Run.objects.get(pk=run_id).trigger_message_id
    )
    refused = api.post(f"/api/runs/{run_id}/retry")  # its retry is being answered
    assert refused.status_code == 409 and "Wait for the current answer" in refused.json()["error"]
    other_run = Run.objects.create(conversation=theirs, status=Run.Status.FAILED)
    assert api.post(f"/api/runs/{other_run.pk}/retry").status_code == 404


def test_pin_and_unpin(api, mine, theirs):
    message = message_create(conversation=mine, role="user", content="remember this")

    pinned = api.post(f"/api/messages/{message.pk}/pin")
    assert pinned.status_code == 200 and pinned.json()["pinned"] is True
    message.refresh_from_db()
    assert message.pinned

    unpinned = api.post(f"/api/messages/{message.pk}/unpin")
    assert unpinned.status_code == 200 and unpinned.json()["pinned"] is False
    message.refresh_from_db()
    assert not message.pinned

    foreign = message_create(conversation=theirs, role="user", content="bob's")
    assert api.post(f"/api/messages/{foreign.pk}/pin").status_code == 404
    foreign.refresh_from_db()
    assert not foreign.pinned


# ------------------------------------------------------------------ models and tools


def test_models_lists_usable_models_without_secrets(api, chat_model):
    from llms.models import LLMModel

    hidden = LLMModel.objects.create(
        provider=chat_model.provider, model_id="vip", display_name="VIP"
    )
    hidden.allowed_groups.add(Group.objects.create(name="vip"))
    LLMModel.objects.create(provider=chat_model.provider, model_id="off", enabled=False)

    response = api.get("/api/models")

    assert response.status_code == 200
    [model] = response.json()["models"]
    assert model["id"] == chat_model.pk and model["is_default"] is True
    assert model["provider"] == "scripted" and model["abilities"]["tool_call"] is True
    text = response.content.decode()
    assert PROVIDER_KEY not in text and PROVIDER_KEY[-4:] not in text
    assert chat_model.provider.base_url not in text
    detail = api.post("/api/conversations", {"model": chat_model.pk}).content.decode()
    assert PROVIDER_KEY not in detail


def test_tools_lists_what_the_user_may_use(api, user):
    from tools.models import ToolConfig
    from tools.services import toolconfig_sync

    toolconfig_sync()
    restricted = ToolConfig.objects.get(name="calculator")
    restricted.allowed_groups.add(Group.objects.create(name="maths"))

    names = {tool["name"] for tool in api.get("/api/tools").json()["tools"]}
    assert "calculator" not in names

    user.groups.add(Group.objects.get(name="maths"))
    tools = {tool["name"]: tool for tool in api.get("/api/tools").json()["tools"]}
    assert "calculator" in tools and tools["calculator"]["description"]
    assert set(tools["calculator"]) == {"name", "description", "requires_confirmation", "server"}
    assert tools["calculator"]["server"] is None


def test_tools_lists_the_mcp_tools_the_user_may_use(api, user):
    """MCP servers' tools (from their cached listings), with whether a call waits for
    approval (the server's switch, or the tool ticked on its row); a server restricted to
    other groups, disabled, or never listed yet lists nothing."""
    from tools.models import MCPServer

    cache = [{"name": "delete_page", "description": "Delete a  wiki page", "input_schema": {}}]
    MCPServer.objects.create(
        name="wiki", command="x", tools_cache=cache, requires_confirmation=True
    )
    pages = [*cache, {"name": "read_page", "description": "Read a page", "input_schema": {}}]
    MCPServer.objects.create(
        name="notes", command="x", tools_cache=pages, confirm_tools=["delete_page"]
    )
    staff_only = MCPServer.objects.create(name="ops", command="x", tools_cache=cache)
    staff_only.allowed_groups.add(Group.objects.create(name="ops"))
    MCPServer.objects.create(name="off", command="x", tools_cache=cache, enabled=False)
    MCPServer.objects.create(name="new", command="x")

    tools = {tool["name"]: tool for tool in api.get("/api/tools").json()["tools"]}

    assert tools["wiki__delete_page"] == {
        "name": "wiki__delete_page",
        "description": "Delete a wiki page",
        "requires_confirmation": True,
        "server": "wiki",
    }
    assert tools["notes__delete_page"]["requires_confirmation"] is True
    assert tools["notes__read_page"]["requires_confirmation"] is False
    assert not {name for name in tools if name.split("__")[0] in ("ops", "off", "new")}

    user.groups.add(Group.objects.get(name="ops"))
    tools = {tool["name"]: tool for tool in api.get("/api/tools").json()["tools"]}
    assert tools["ops__delete_page"]["server"] == "ops"


def test_edit_a_question_and_switch_between_its_versions(api, mine, theirs):
    first = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "Cats?"}).json()
    busy = api.post(f"/api/messages/{first['message_id']}/edit", {"content": "Dogs?"})
    assert busy.status_code == 409 and "Wait for the current answer" in busy.json()["error"]
    Run.objects.filter(pk=first["run_id"]).update(status=Run.Status.SUCCEEDED)
    assert (
        api.post(f"/api/messages/{first['message_id']}/edit", {"content": " "}).status_code == 400
    )

    edited = api.post(f"/api/messages/{first['message_id']}/edit", {"content": "Dogs?"})

    assert edited.status_code == 202
    detail = api.get(f"/api/conversations/{mine.pk}").json()
    assert [m["content"] for m in detail["messages"]] == ["Dogs?"]
    assert [r["id"] for r in detail["runs"]] == [edited.json()["run_id"]]
    assert detail["runs"][0]["question_versions"] == {
        "ids": [first["message_id"], edited.json()["message_id"]], "index": 1, "count": 2,
    }  # fmt: skip
    every = api.get(f"/api/conversations/{mine.pk}?branch=all").json()
    assert [m["content"] for m in every["messages"]] == ["Cats?", "Dogs?"]
    assert [r["selected"] for r in every["runs"]] == [False, True]

    Run.objects.filter(pk=edited.json()["run_id"]).update(status=Run.Status.SUCCEEDED)
    switched = api.post(f"/api/messages/{first['message_id']}/select")
    assert switched.status_code == 200
    assert [m["content"] for m in switched.json()["messages"]] == ["Cats?"]
    assert api.get(f"/api/conversations/{mine.pk}").json()["messages"][0]["content"] == "Cats?"

    their_message = message_create(conversation=theirs, role="user", content="theirs")
    assert api.post(f"/api/messages/{their_message.pk}/edit", {"content": "x"}).status_code == 404
    assert api.post(f"/api/messages/{their_message.pk}/select").status_code == 404


def test_regenerate_with_a_model_the_user_may_not_use_is_refused(api, mine, chat_model):
    from llms.models import LLMModel

    hidden = LLMModel.objects.create(
        provider=chat_model.provider, model_id="hidden", display_name="Hidden", enabled=False
    )
    posted = api.post(f"/api/conversations/{mine.pk}/messages", {"content": "Hi"}).json()
    Run.objects.filter(pk=posted["run_id"]).update(status=Run.Status.SUCCEEDED)

    refused = api.post(f"/api/runs/{posted['run_id']}/regenerate", {"model": hidden.pk})
    assert refused.status_code == 400 and "model" in refused.json()["fields"]
    regenerated = api.post(f"/api/runs/{posted['run_id']}/regenerate", {"model": chat_model.pk})
    assert regenerated.status_code == 202
    assert regenerated.json()["model_id"] == chat_model.pk
    assert regenerated.json()["parent_run_id"] is None
    assert Run.objects.filter(conversation=mine).count() == 2
