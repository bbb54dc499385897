"""Each audited event, recorded once with its actor, target and changes, by driving the
code path people use: the login form, the token page, the admin, the API, the pages."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from audit.models import AuditEvent
from conversations import services
from conversations.models import APIToken, SharedLink
from conversations.runs.publisher import publish_events_sync
from engine.events import Approval
from llms.models import LLMModel, Provider, RoleAssignment
from llms.services import model_upsert, provider_upsert
from tests.conversations.api.conftest import JsonClient
from tests.conversations.branches.trees import build_tree
from tests.llms.test_admin import form_data
from tools.models import MCPServer, ToolConfig
from tools.services import toolconfig_sync

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
SECRET = "sk-audit-secret-0123456789"
# Through a trusted proxy (the test trusts one hop): its X-Request-ID is believed.
PROXIED = {"X-Forwarded-For": "10.8.8.8", "X-Request-ID": "req-approve-1"}


@pytest.fixture
def no_launch(monkeypatch):
    """Runs are created but not started."""
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


def events(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


def raw_log() -> str:
    """Every stored row as the database holds it."""
    return json.dumps(list(AuditEvent.objects.values()), default=str)


@pytest.fixture
def admin_client(client, staff_user):
    client.force_login(staff_user)
    return client


# ------------------------------------------------------------------------ sign-in


def test_a_login_is_recorded_with_the_user_and_address(client, user, settings):
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1
    response = client.post(
        LOGIN,
        {"username": "alice", "password": "pw-alice-123"},
        REMOTE_ADDR="127.0.0.1",  # the proxy
        headers={"X-Forwarded-For": "10.1.2.3", "X-Request-ID": "req-42"},
    )
    assert response.status_code == 302

    [event] = events("auth.login")
    assert (event.actor, event.actor_name, event.target_id) == (user, "alice", str(user.pk))
    assert (event.address, event.request_id) == ("10.1.2.3", "req-42")
    assert "pw-alice-123" not in raw_log()


def test_failed_logins_keep_the_username_never_the_password(client, user, settings):
    tries = settings.AXES_FAILURE_LIMIT + 1  # the last one is refused by the lock-out
    for n in range(tries):
        client.post(LOGIN, {"username": "alice", "password": f"wrong-{n}"}, REMOTE_ADDR="10.9.9.9")
    client.post(LOGIN, {"username": "nobody", "password": "guess"}, REMOTE_ADDR="10.9.9.9")

    failed = events("auth.login_failed")
    assert [e.actor_name for e in failed] == ["alice"] * tries + ["nobody"]
    assert {e.actor_id for e in failed} == {None}
    assert {e.address for e in failed} == {"10.9.9.9"}
    assert events("auth.login") == []
    log = raw_log()
    assert "wrong-" not in log and "guess" not in log


# ------------------------------------------------------------------------- tokens


def test_tokens_created_and_revoked_from_their_page(user_client, user):
    user_client.post("/settings/tokens/", {"name": "laptop"}, REMOTE_ADDR="10.0.0.7")
    token = APIToken.objects.get(user=user)
    shown = user_client.get("/settings/tokens/").content.decode()

    user_client.post(f"/settings/tokens/{token.pk}/revoke/")
    user_client.post(f"/settings/tokens/{token.pk}/revoke/")  # already revoked: no event

    [created] = events("token.created")
    assert (created.actor, created.target_type, created.target_id) == (
        user,
        "conversations.apitoken",
        str(token.pk),
    )
    assert created.target_label == f"laptop ({token.prefix}…)"
    assert created.address == "10.0.0.7"
    [revoked] = events("token.revoked")
    assert (revoked.actor, revoked.target_id) == (user, str(token.pk))
    [raw] = set(re.findall(r"as_[A-Za-z0-9_-]{43}", shown))
    log = raw_log()
    assert raw not in log and token.token_hash not in log


# ---------------------------------------------------------- the admin's configuration


def test_provider_created_changed_and_deleted_in_the_admin(admin_client, staff_user):
    response = admin_client.post(
        reverse("admin:llms_provider_add"),
        {
            "name": "acme",
            "kind": "openai",
            "base_url": "http://llm.test/v1",
            "timeout": "60",
            "new_api_key": SECRET,
            "models-TOTAL_FORMS": "0",
            "models-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 302
    provider = Provider.objects.get(name="acme")
    [created] = events("provider.created")
    assert (created.actor, created.target_id) == (staff_user, str(provider.pk))
    assert created.changes["name"] == [None, "acme"]
    assert created.changes["api_key"] == [None, "***"]

    url = reverse("admin:llms_provider_change", args=[provider.pk])
    data = form_data(admin_client.get(url))
    admin_client.post(url, {**data, "timeout": "90", "new_api_key": SECRET + "-2"})
    admin_client.post(url, form_data(admin_client.get(url)))  # nothing changed: no event
    [changed] = events("provider.changed")
    assert changed.changes == {"timeout": [60.0, 90.0], "api_key": ["***", "***"]}

    delete = reverse("admin:llms_provider_delete", args=[provider.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    [deleted] = events("provider.deleted")
    assert (deleted.target_id, deleted.target_label) == (str(provider.pk), "acme")
    assert deleted.changes["base_url"] == ["http://llm.test/v1", None]
    assert SECRET not in raw_log()


def test_model_and_its_groups_changed_in_the_admin(admin_client, staff_user):
    provider, _ = provider_upsert(name="prov", base_url="http://llm.test/v1", api_key=SECRET)
    model, _ = model_upsert(provider=provider, model_id="m1", display_name="Model One")
    team = Group.objects.create(name="team")
    url = reverse("admin:llms_llmmodel_change", args=[model.pk])
    data = form_data(admin_client.get(url))

    response = admin_client.post(
        url, {**data, "display_name": "Model Uno", "allowed_groups": [str(team.pk)]}
    )

    assert response.status_code == 302
    [changed] = events("model.changed")
    assert changed.actor == staff_user and changed.target_type == "llms.llmmodel"
    assert changed.changes == {
        "display_name": ["Model One", "Model Uno"],
        "allowed_groups": [[], ["team"]],
    }
    assert LLMModel.objects.get().display_name == "Model Uno"


def test_tool_secret_setting_changed_in_the_admin_is_masked(admin_client, staff_user):
    toolconfig_sync()
    tool = ToolConfig.objects.get(name="web_search")
    url = reverse("admin:tools_toolconfig_change", args=[tool.pk])
    data = form_data(admin_client.get(url))

    response = admin_client.post(
        url, {**data, "secret__api_key": SECRET, "requires_confirmation": "on"}
    )

    assert response.status_code == 302
    [changed] = events("tool.changed")
    assert changed.actor == staff_user and changed.target_label == "web_search"
    assert changed.changes["requires_confirmation"] == [False, True]
    assert changed.changes["secrets"] == ["", "***"]
    assert SECRET not in raw_log()


def test_mcp_server_added_changed_and_deleted_in_the_admin(admin_client, staff_user):
    fields = {
        "name": "notes",
        "description": "",
        "transport": "http",
        "command": "",
        "args": "[]",
        "url": "http://127.0.0.1:9/mcp",
        "timeout": "20",
        "env_input": "",
    }
    admin_client.post(
        reverse("admin:tools_mcpserver_add"),
        {**fields, "headers_input": json.dumps({"Authorization": f"Bearer {SECRET}"})},
    )
    server = MCPServer.objects.get(name="notes")
    url = reverse("admin:tools_mcpserver_change", args=[server.pk])
    admin_client.post(url, {**fields, "timeout": "30", "headers_input": "{}"})
    admin_client.post(reverse("admin:tools_mcpserver_delete", args=[server.pk]), {"post": "yes"})

    [created] = events("mcp.created")
    assert created.actor == staff_user and created.changes["headers"] == [None, "***"]
    [changed] = events("mcp.changed")
    assert changed.changes == {"timeout": [20.0, 30.0], "headers": ["***", ""]}
    [deleted] = events("mcp.deleted")
    assert deleted.target_label == "notes" and deleted.target_id == str(server.pk)
    assert SECRET not in raw_log()


def test_group_and_its_role_models_changed_in_the_admin(admin_client, staff_user):
    provider, _ = provider_upsert(name="prov", base_url="http://llm.test/v1")
    model, _ = model_upsert(provider=provider, model_id="m1")
    add = reverse("admin:auth_group_add")
    data = form_data(admin_client.get(add))
    prefix = "llm_role_assignments"

    response = admin_client.post(
        add,
        {
            **data,
            "name": "analysts",
            f"{prefix}-TOTAL_FORMS": "1",
            f"{prefix}-0-role": "fast",
            f"{prefix}-0-model": str(model.pk),
        },
    )

    assert response.status_code == 302, response.context and response.context["errors"]
    group = Group.objects.get(name="analysts")
    [created] = events("group.created")
    assert (created.actor, created.target_id) == (staff_user, str(group.pk))
    [role] = events("role.created")
    assignment = RoleAssignment.objects.get(group=group)
    assert (role.actor, role.target_id) == (staff_user, str(assignment.pk))
    assert role.changes["role"] == [None, "fast"] and role.changes["group"] == [None, "analysts"]

    url = reverse("admin:auth_group_change", args=[group.pk])
    data = form_data(admin_client.get(url))
    admin_client.post(url, {**data, "name": "analysts-2", f"{prefix}-0-DELETE": "on"})
    [renamed] = events("group.changed")
    assert renamed.changes == {"name": ["analysts", "analysts-2"]}
    [removed] = events("role.deleted")
    assert removed.target_id == str(assignment.pk) and removed.changes["role"] == ["fast", None]


def test_group_membership_from_the_admin_and_from_code(admin_client, staff_user, user):
    team = Group.objects.create(name="team")
    user.date_joined = user.date_joined.replace(microsecond=0)  # what the form can hold
    user.save()
    url = reverse("admin:auth_user_change", args=[user.pk])
    data = form_data(admin_client.get(url))

    joined_at = data.pop("date_joined").split()
    data |= {"date_joined_0": joined_at[0], "date_joined_1": joined_at[1][:8]}
    response = admin_client.post(url, {**data, "groups": [str(team.pk)], "is_staff": "on"})

    assert response.status_code == 302, response.context["errors"]
    [joined] = events("group.joined")
    assert (joined.actor, joined.target_id, joined.changes) == (
        staff_user,
        str(user.pk),
        {"group": [None, "team"]},
    )
    [changed] = events("user.changed")  # the flags; membership has its own events
    assert changed.changes == {"is_staff": [False, True]}
    assert "password" not in json.dumps(changed.changes)

    # A sync outside the admin (the future SSO): recorded, by nobody in particular.
    team.user_set.remove(user)
    other = Group.objects.create(name="other")
    user.groups.add(other)
    user.groups.clear()
    left = events("group.left")
    assert [(e.actor_id, e.changes["group"][0]) for e in left] == [(None, "team"), (None, "other")]
    assert [e.changes for e in events("group.joined")][1:] == [{"group": [None, "other"]}]


# -------------------------------------------------------------- approvals, transfer


def test_approval_and_denial_from_the_page(user_client, user, no_launch, settings):
    settings.AGENTSITE_TRUSTED_PROXY_HOPS = 1
    conversation = services.conversation_create(owner=user)
    _, run, _ = services.message_post(conversation=conversation, user=user, content="erase")
    requested = [
        Approval("requested", f"call-{n}", "erase", {"path": f"/secret-{n}"}, "It erases.")
        for n in (1, 2)
    ]
    publish_events_sync(run=run, events=requested)
    url = "/runs/{}/approvals/{}/"

    approve = {"decision": "approve"}
    response = user_client.post(url.format(run.pk, "call-1"), approve, headers=PROXIED)
    assert response.status_code == 200
    assert user_client.post(url.format(run.pk, "call-2"), {"decision": "deny"}).status_code == 200
    user_client.post(url.format(run.pk, "call-2"), {"decision": "approve"})  # refused: 409

    [approved] = events("approval.approved")
    assert approved.actor == user and approved.target_type == "conversations.toolapproval"
    assert approved.target_label == f"erase (run {run.pk}, call call-1)"
    assert approved.changes == {"status": ["pending", "approved"]}
    assert (approved.address, approved.request_id) == ("10.8.8.8", "req-approve-1")
    [denied] = events("approval.denied")
    assert denied.changes == {"status": ["pending", "denied"]}
    assert "/secret-" not in raw_log()


@pytest.fixture
def api(client, user):
    from conversations.http.tokens import token_create

    return JsonClient(client, token_create(user=user, name="api")[1])


def test_shares_created_and_revoked_through_the_api(api, user):
    tree = build_tree(user)
    response = api.post(f"/api/conversations/{tree.conversation.pk}/shares", {})
    share = SharedLink.objects.get(pk=response.json()["id"])
    api.delete(f"/api/shares/{share.pk}")
    api.delete(f"/api/shares/{share.pk}")  # idempotent: one event

    [created] = events("share.created")
    assert (created.actor, created.target_id, created.target_label) == (
        user,
        str(share.pk),
        "Trip plan",
    )
    assert created.changes["conversation"] == [None, tree.conversation.pk]
    [revoked] = events("share.revoked")
    assert (revoked.actor, revoked.target_id) == (user, str(share.pk))
    assert share.token not in raw_log()


def test_shares_from_the_pages(user_client, user):
    tree = build_tree(user)
    user_client.post(reverse("conversation_share", args=[tree.conversation.pk]))
    share = SharedLink.objects.get()
    user_client.post(reverse("share_revoke", args=[share.pk]), REMOTE_ADDR="10.4.4.4")

    assert [e.actor for e in events("share.created")] == [user]
    [revoked] = events("share.revoked")
    assert (revoked.actor, revoked.address) == (user, "10.4.4.4")


def test_export_and_import_through_the_api_and_the_pages(api, user_client, user):
    tree = build_tree(user)
    document = api.get(f"/api/conversations/{tree.conversation.pk}/export", tree="1").json()
    api.get(f"/api/conversations/{tree.conversation.pk}/export", format="pdf")  # refused
    user_client.get(
        reverse("conversation_export", args=[tree.conversation.pk]), {"format": "markdown"}
    )
    imported = api.post("/api/conversations/import", document).json()

    exported = events("conversation.exported")
    assert [(e.actor, e.target_id, e.changes) for e in exported] == [
        (user, str(tree.conversation.pk), {"format": [None, "json, every branch"]}),
        (user, str(tree.conversation.pk), {"format": [None, "markdown"]}),
    ]
    [event] = events("conversation.imported")
    assert (event.actor, event.target_id) == (user, str(imported["id"]))
    assert event.changes == {"messages": [None, 7], "runs": [None, 4]}
