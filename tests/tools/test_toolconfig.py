"""ToolConfig rows: sync from the registry, access, config validation, secrets, confirmation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import connection
from django.urls import reverse

from core.crypto import reset_cache
from core.errors import ApplicationError
from engine import Tool, ToolResult
from tools import registry as tool_registry
from tools.models import ToolConfig
from tools.registry import ToolContext, ToolSpec
from tools.services import (
    toolconfig_sync,
    toolconfig_update,
    tools_available_for_user,
    tools_for_user,
)

pytestmark = pytest.mark.django_db

ECHO_SCHEMA = {
    "type": "object",
    "properties": {
        "prefix": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "api_token": {"type": "string", "x-secret": True, "title": "API token"},
    },
    "additionalProperties": False,
}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    reset_cache()


def echo_build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    def echo(text: str) -> str:
        """Echo the text back."""
        token = config.get("api_token", "")
        return f"{config.get('prefix', '')}{text} [user {context.user_id}] [token {token}]"

    return [
        Tool(
            "echo",
            "Echo the text back.",
            {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
            echo,
        )
    ]


def async_build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    async def shout(text: str) -> str:
        return text.upper()

    return [
        Tool(
            "shout", "Shout.", {"type": "object", "properties": {"text": {"type": "string"}}}, shout
        )
    ]


def broken_build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    raise RuntimeError("cannot build")


@pytest.fixture
def specs(monkeypatch):
    """Three test specs registered in the site registry for the test's duration."""
    made = {
        "echo": ToolSpec(
            "echo",
            "Echo the text back.",
            echo_build,
            config_schema=ECHO_SCHEMA,
            default_config={"prefix": "> "},
        ),
        "shout": ToolSpec(
            "shout", "Shout.", async_build, enabled_by_default=False, requires_confirmation=True
        ),
        "broken": ToolSpec("broken", "Never builds.", broken_build),
    }
    for name, spec in made.items():
        monkeypatch.setitem(tool_registry._SPECS, name, spec)
    return made


def names(registry) -> set[str]:
    return set(registry.names()) & {"echo", "shout", "broken"}


def run(tool: Tool, **arguments: Any) -> ToolResult:
    return asyncio.run(tool.invoke(arguments))


def test_sync_creates_rows_with_spec_defaults_and_keeps_admin_choices(specs):
    toolconfig_sync()
    echo, shout = ToolConfig.objects.get(name="echo"), ToolConfig.objects.get(name="shout")
    assert echo.enabled and not echo.requires_confirmation and echo.config == {}
    assert not shout.enabled and shout.requires_confirmation
    ToolConfig.objects.filter(name="echo").update(enabled=False)
    assert toolconfig_sync() == 0
    assert not ToolConfig.objects.get(name="echo").enabled


def test_tools_for_user_is_registered_enabled_and_allowed(specs, user, other_user):
    toolconfig_sync()
    ToolConfig.objects.create(name="gone-from-code")  # not registered: never offered
    context = ToolContext(user_id=user.pk)
    # shout is disabled by default, broken fails to build: only echo.
    assert names(tools_for_user(user=user, context=context)) == {"echo"}

    shout = ToolConfig.objects.get(name="shout")
    team = Group.objects.create(name="team")
    user.groups.add(team)
    toolconfig_update(toolconfig=shout, enabled=True, allowed_groups=[team])
    assert names(tools_for_user(user=user, context=context)) == {"echo", "shout"}
    assert names(tools_for_user(user=other_user, context=context)) == {"echo"}
    assert "gone-from-code" not in tools_for_user(user=user, context=context)
    assert [t["name"] for t in tools_available_for_user(user=other_user) if t["name"] in specs] == [
        "broken",
        "echo",
    ]


def test_config_is_validated_and_applied(specs, user):
    toolconfig_sync()
    echo = ToolConfig.objects.get(name="echo")
    with pytest.raises(ApplicationError) as info:
        toolconfig_update(toolconfig=echo, config={"limit": 0})
    assert info.value.code == "invalid_config" and "limit" in info.value.message
    with pytest.raises(ApplicationError, match="api_token"):
        toolconfig_update(
            toolconfig=ToolConfig.objects.get(name="echo"), config={"api_token": "plain"}
        )
    bad = ToolConfig(name="echo", config={"unexpected": 1})
    with pytest.raises(ValidationError):
        bad.clean()

    toolconfig_update(
        toolconfig=ToolConfig.objects.get(name="echo"),
        config={"prefix": "= ", "limit": 3},
        description_override="Repeat exactly what you are given.",
    )
    tool = tools_for_user(user=user, context=ToolContext(user_id=user.pk)).get("echo")
    assert tool.description == "Repeat exactly what you are given."
    assert run(tool, text="hi").content.startswith("= hi [user")

    # A row made invalid behind the service's back is left out, not fatal.
    ToolConfig.objects.filter(name="echo").update(config={"limit": "many"})
    assert "echo" not in tools_for_user(user=user, context=ToolContext())


def test_secret_settings_are_encrypted_and_merged(specs, user):
    toolconfig_sync()
    echo = ToolConfig.objects.get(name="echo")
    toolconfig_update(toolconfig=echo, secrets={"api_token": "tok-secret-123456"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT secrets, config FROM tools_toolconfig WHERE name = 'echo'")
        stored_secrets, stored_config = cursor.fetchone()
    assert stored_secrets.startswith("fernet:") and "tok-secret" not in stored_secrets
    assert "tok-secret" not in stored_config
    echo = ToolConfig.objects.get(name="echo")
    assert echo.effective_config() == {"prefix": "> ", "api_token": "tok-secret-123456"}
    tool = tools_for_user(user=user, context=ToolContext()).get("echo")
    # The tool got the secret; what it says back is redacted of it (tools/redaction.py).
    assert "[token [secret redacted]]" in run(tool, text="x").content


def test_the_admins_confirmation_flag_marks_every_call_for_approval(specs, user):
    """The run's loop asks the user before each call of such a tool (engine.approval);
    the admin's flag is the one that counts, whatever the spec said."""
    toolconfig_sync()
    toolconfig_update(toolconfig=ToolConfig.objects.get(name="shout"), enabled=True)
    toolconfig_update(toolconfig=ToolConfig.objects.get(name="echo"), requires_confirmation=True)
    registry = tools_for_user(user=user, context=ToolContext(user_id=user.pk))
    shout, echo = registry.get("shout"), registry.get("echo")
    assert shout.confirmation_reason({"text": "hi"}) and echo.confirmation_reason({"text": "hi"})
    toolconfig_update(toolconfig=ToolConfig.objects.get(name="shout"), requires_confirmation=False)
    shout = tools_for_user(user=user, context=ToolContext(user_id=user.pk)).get("shout")
    assert shout.confirmation_reason({"text": "hi"}) is None
    assert any(t["requires_confirmation"] for t in tools_available_for_user(user=user))


def test_tool_admin_lists_syncs_and_keeps_secrets_write_only(client, staff_user, specs):
    client.force_login(staff_user)
    listing = client.get(reverse("admin:tools_toolconfig_changelist"))
    assert listing.status_code == 200 and ToolConfig.objects.filter(name="echo").exists()
    echo = ToolConfig.objects.get(name="echo")
    url = reverse("admin:tools_toolconfig_change", args=[echo.pk])
    page = client.get(url)
    assert b"API token" in page.content and b"No value set." in page.content
    form = page.context["adminform"].form
    data = {
        "enabled": "on",
        "config": '{"limit": 2}',
        "description_override": "",
        "secret__api_token": "tok-admin-secret-999",
    }
    response = client.post(url, data)
    assert response.status_code == 302, form.errors
    echo.refresh_from_db()
    assert echo.secrets_dict == {"api_token": "tok-admin-secret-999"} and echo.config == {
        "limit": 2
    }
    page = client.get(url)
    assert b"tok-admin-secret-999" not in page.content
    assert "ending in …-999".encode() in page.content

    response = client.post(url, {**data, "secret__api_token": "", "config": '{"limit": 0}'})
    assert response.status_code == 200 and b"limit" in response.content
    client.post(url, {**data, "secret__api_token": "", "clear_secret__api_token": "on"})
    echo.refresh_from_db()
    assert echo.secrets_dict == {}
    assert client.get(reverse("admin:tools_toolconfig_add")).status_code == 403


def test_a_tool_that_cannot_work_is_not_offered_and_the_admin_sees_why(client, staff_user, user):
    toolconfig_sync()
    row = ToolConfig.objects.get(name="web_search")
    context = ToolContext(user_id=user.pk)
    assert "web_search" not in tools_for_user(user=user, context=context)
    assert "web_search" not in [t["name"] for t in tools_available_for_user(user=user)]
    client.force_login(staff_user)
    listing = client.get(reverse("admin:tools_toolconfig_changelist")).content.decode()
    assert "no: no search backend is chosen" in listing

    toolconfig_update(toolconfig=row, config={"backend": "searxng"})
    assert "web_search" not in tools_for_user(user=user, context=context)
    listing = client.get(reverse("admin:tools_toolconfig_changelist")).content.decode()
    assert "needs a base URL" in listing

    toolconfig_update(
        toolconfig=row, config={"backend": "searxng", "base_url": "http://search.example"}
    )
    assert "web_search" in tools_for_user(user=user, context=context)
    assert "web_search" in [t["name"] for t in tools_available_for_user(user=user)]
