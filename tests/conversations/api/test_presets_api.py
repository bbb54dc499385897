"""Presets (issue 46) through the real URLconf: create, list, read, change and delete
your own; one shared with your group is read-only (a 404 to change); an admin's is
everyone's; every field checked with your rights (a 400 naming it); a conversation
started from a preset gets its settings, checked with the starter's rights: a model or
tool they may not use is refused saying which, never widened."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from conversations.models import Conversation, Preset
from knowledge.models import KnowledgeBase
from llms.models import LLMModel
from tools.models import ToolConfig
from tools.services import toolconfig_sync, toolconfig_update

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Api:
    def __init__(self, client, token: str) -> None:
        self.client, self.headers = client, bearer(token)

    def get(self, path: str):
        return self.client.get(path, headers=self.headers)

    def post(self, path: str, body):
        return self.client.post(path, body, content_type="application/json", headers=self.headers)

    def patch(self, path: str, body):
        return self.client.patch(path, body, content_type="application/json", headers=self.headers)

    def delete(self, path: str):
        return self.client.delete(path, headers=self.headers)


@pytest.fixture
def alice(client, token):
    return Api(client, token)


@pytest.fixture
def bob(client, other_token):
    return Api(client, other_token)


@pytest.fixture
def team(user, other_user) -> Group:
    group = Group.objects.create(name="team")
    user.groups.add(group)
    other_user.groups.add(group)
    return group


def refusal(response, field: str) -> str:
    assert response.status_code == 400, response.content
    body = response.json()
    assert field in body["fields"], body
    return body["error"]


def test_your_preset_round_trips(alice, user, chat_model) -> None:
    toolconfig_sync()
    base = KnowledgeBase.objects.create(owner=user, name="Handbook")
    created = alice.post(
        "/api/presets",
        {
            "name": "  SQL   reviewer ",
            "description": "Reviews queries",
            "model": chat_model.pk,
            "system_prompt": "Review SQL for injection.",
            "tools": ["calculator"],
            "knowledge": [base.pk],
            "params": {"temperature": 0.2},
            "mode": "plan",
            "starters": ["Review this query", "  ", "Explain an index"],
        },
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["name"] == "SQL reviewer" and body["read_only"] is False
    assert body["owner"] == "alice" and body["model"] == {"id": chat_model.pk, "name": "Scripted"}
    assert body["starters"] == ["Review this query", "Explain an index"]
    assert body["knowledge"] == [{"id": base.pk, "name": "Handbook"}]
    assert (body["params"], body["mode"], body["tools"]) == (
        {"temperature": 0.2},
        "plan",
        ["calculator"],
    )

    path = f"/api/presets/{body['id']}"
    changed = alice.patch(path, {"starters": [], "params": {"top_p": 0.5}})
    assert changed.status_code == 200, changed.content
    assert changed.json()["starters"] == [] and changed.json()["params"] == {"top_p": 0.5}
    assert [p["id"] for p in alice.get("/api/presets").json()["presets"]] == [body["id"]]
    assert alice.delete(path).status_code == 204
    assert alice.get(path).status_code == 404


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"starters": ["a", "b", "c", "d", "e"]}, "starters", ""),
        ({"params": {"temperature": 5.0}}, "params.temperature", "must be between 0 and 2"),
        ({"tools": ["no_such_tool"]}, "tools", "Not a tool you may use: no_such_tool."),
        ({"knowledge": [999999]}, "knowledge", "No knowledge base of yours has the id 999999."),
        ({"groups": [999999]}, "groups", "You are not in the group with the id 999999."),
        ({"mode": "fast"}, "mode", ""),
        ({"groups": [2**70]}, "groups.0", ""),  # past any row's id: a 400, not a crash
        ({"knowledge": [-1]}, "knowledge.0", ""),
        ({"name": ""}, "name", ""),
    ],
)  # fmt: skip
def test_a_bad_field_is_refused_naming_it(alice, chat_model, body, field, says) -> None:
    toolconfig_sync()
    response = alice.post("/api/presets", {"name": "P", **body})
    assert says in refusal(response, field)
    assert not Preset.objects.exists()


def test_a_model_you_may_not_use_is_refused(alice, chat_model, other_user) -> None:
    restricted = LLMModel.objects.create(provider=chat_model.provider, model_id="private")
    restricted.allowed_groups.add(Group.objects.create(name="others"))
    response = alice.post("/api/presets", {"name": "P", "model": restricted.pk})
    assert "not available to you" in refusal(response, "model")


def test_a_shared_preset_is_read_only_and_invisible_to_others(
    alice, bob, team, client, django_user_model, chat_model
) -> None:
    shared = bob.post("/api/presets", {"name": "Team helper", "groups": [team.pk]}).json()
    private = bob.post("/api/presets", {"name": "Bob's own"}).json()
    listed = alice.get("/api/presets").json()["presets"]
    assert [(p["name"], p["read_only"], p["owner"]) for p in listed] == [
        ("Team helper", True, "bob")
    ]
    assert alice.get(f"/api/presets/{private['id']}").status_code == 404
    assert alice.patch(f"/api/presets/{shared['id']}", {"name": "Mine"}).status_code == 404
    assert alice.delete(f"/api/presets/{shared['id']}").status_code == 404
    assert Preset.objects.get(pk=shared["id"]).name == "Team helper"


def test_an_admins_preset_is_everyones(alice, bob, chat_model) -> None:
    Preset.objects.create(owner=None, name="Company assistant", starters=["Hi"])
    for api in (alice, bob):
        [preset] = api.get("/api/presets").json()["presets"]
        assert (preset["owner"], preset["read_only"]) == (None, True)


# ------------------------------------------------------------- a chat from a preset


def test_a_conversation_starts_with_the_presets_settings(
    alice, bob, team, user, other_user, chat_model
) -> None:
    toolconfig_sync()
    shared_base = KnowledgeBase.objects.create(owner=other_user, name="Shared")
    shared_base.shared_groups.add(team)
    private_base = KnowledgeBase.objects.create(owner=other_user, name="Bob only")
    preset = bob.post(
        "/api/presets",
        {"name": "Helper", "model": chat_model.pk, "mode": "auto", "system_prompt": "Be kind.",
         "params": {"temperature": 0.7}, "tools": ["calculator"],
         "knowledge": [shared_base.pk, private_base.pk], "groups": [team.pk]},
    ).json()  # fmt: skip
    created = alice.post("/api/conversations", {"preset": preset["id"], "title": "Mine"})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["model"]["id"] == chat_model.pk and body["mode"] == "auto"
    assert (body["system_prompt"], body["params"], body["tools"]) == (
        "Be kind.", {"temperature": 0.7}, ["calculator"]
    )  # fmt: skip
    # bob's private base is not alice's to search: left out, never widened.
    assert body["knowledge"] == [{"id": shared_base.pk, "name": "Shared"}]
    assert Conversation.objects.get(pk=body["id"]).preset_id == preset["id"]

    overridden = alice.post(
        "/api/conversations",
        {"preset": preset["id"], "mode": "react", "params": {"temperature": 0.1}},
    ).json()
    assert overridden["mode"] == "react" and overridden["params"] == {"temperature": 0.1}


def test_a_preset_with_a_model_or_tool_you_may_not_use_starts_nothing(
    alice, bob, team, chat_model
) -> None:
    toolconfig_sync()
    secret = Group.objects.create(name="bob's lab")
    bob_user = team.user_set.get(username="bob")
    bob_user.groups.add(secret)
    lab_model = LLMModel.objects.create(provider=chat_model.provider, model_id="lab-model")
    lab_model.allowed_groups.add(secret)
    toolconfig_update(toolconfig=ToolConfig.objects.get(name="calculator"), allowed_groups=[secret])
    with_model = bob.post(
        "/api/presets", {"name": "Lab", "model": lab_model.pk, "groups": [team.pk]}
    ).json()
    with_tool = bob.post(
        "/api/presets", {"name": "Calc", "tools": ["calculator"], "groups": [team.pk]}
    ).json()
    before = Conversation.objects.count()
    error = refusal(alice.post("/api/conversations", {"preset": with_model["id"]}), "preset")
    assert error == (
        "The preset “Lab” uses the model lab-model, which is not available to you: ask its "
        "owner or an administrator."
    )
    error = refusal(alice.post("/api/conversations", {"preset": with_tool["id"]}), "preset")
    assert "offers tools you may not use: calculator" in error
    assert "No preset with this id" in refusal(
        alice.post("/api/conversations", {"preset": 987654}), "preset"
    )
    assert Conversation.objects.count() == before
