from __future__ import annotations

import pytest
from django.urls import reverse

from tools.models import MCPServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


def test_create_with_write_only_secrets_and_health_check(staff_client, mcp_http_url):
    response = staff_client.post(
        reverse("admin:tools_mcpserver_add"),
        {
            "name": "clock",
            "description": "",
            "enabled": "on",
            "transport": "http",
            "command": "",
            "args": "[]",
            "url": mcp_http_url,
            "timeout": "20",
            "headers_input": '{"Authorization": "Bearer very-secret-token"}',
            "env_input": "",
        },
        follow=True,
    )
    assert response.status_code == 200
    server = MCPServer.objects.get(name="clock")
    assert server.headers_dict == {"Authorization": "Bearer very-secret-token"}
    assert server.health_status == "ok" and server.tool_count == 2  # refreshed on save
    assert "connected, 2 tools" in response.content.decode()

    page = staff_client.get(reverse("admin:tools_mcpserver_change", args=[server.pk]))
    html = page.content.decode()
    assert "very-secret-token" not in html
    assert "headers: Authorization (values hidden)" in html
    assert "get_current_time" in html
    listing = staff_client.get(reverse("admin:tools_mcpserver_changelist")).content.decode()
    assert "very-secret-token" not in listing and "clock" in listing


def test_blank_secret_keeps_value_and_action_reports_failures(staff_client):
    server = MCPServer.objects.create(name="gone", command="/nonexistent/mcp", enabled=False)
    server.env_dict = {"API_KEY": "k"}
    server.save()
    staff_client.post(
        reverse("admin:tools_mcpserver_change", args=[server.pk]),
        {
            "name": "gone", "transport": "stdio", "command": "/nonexistent/mcp", "args": "[]",
            "url": "", "timeout": "5", "env_input": "", "headers_input": "",
        },
    )  # fmt: skip
    server.refresh_from_db()
    assert server.env_dict == {"API_KEY": "k"}
    response = staff_client.post(
        reverse("admin:tools_mcpserver_changelist"),
        {"action": "check_connection", "_selected_action": [server.pk]},
        follow=True,
    )
    server.refresh_from_db()
    assert server.health_status == "error"
    assert (
        "Gone: connection failed: MCP server &#x27;gone&#x27; failed" in response.content.decode()
    )
    listing = response.content.decode()  # the badge: a class, as the CSP refuses style=""
    assert '<strong class="mcp-health--error">Error</strong>' in listing
    assert ' style="' not in listing and "tools/admin.css" in listing


def test_invalid_secret_json_is_rejected(staff_client):
    response = staff_client.post(
        reverse("admin:tools_mcpserver_add"),
        {
            "name": "x", "transport": "stdio", "command": "run", "args": "[]", "url": "",
            "timeout": "5", "env_input": "[1, 2]", "headers_input": "",
        },
    )  # fmt: skip
    assert response.status_code == 200 and "must be a JSON object" in response.content.decode()
    assert not MCPServer.objects.exists()


def test_tick_the_tools_that_require_confirmation(staff_client, mcp_http_url):
    """The change page lists the server's tools as boxes; a ticked one is stored, and the
    list keeps a ticked tool the server no longer lists (unticking it drops it)."""
    server = MCPServer.objects.create(name="clock", transport="http", url=mcp_http_url, timeout=20)
    cache = [{"name": "get_current_time"}, {"name": "convert_time"}]
    MCPServer.objects.filter(pk=server.pk).update(tools_cache=cache, confirm_tools=["gone_tool"])
    change = reverse("admin:tools_mcpserver_change", args=[server.pk])
    html = staff_client.get(change).content.decode()
    boxes = {"get_current_time", "convert_time", "gone_tool"}
    assert all(f'type="checkbox" name="confirm_tools" value="{b}"' in html for b in boxes)

    form = {
        "name": "clock", "transport": "http", "command": "", "args": "[]", "url": mcp_http_url,
        "timeout": "20", "env_input": "", "headers_input": "", "confirm_tools": ["convert_time"],
    }  # fmt: skip
    response = staff_client.post(change, form)

    assert response.status_code == 302
    server.refresh_from_db()
    assert server.confirm_tools == ["convert_time"] and not server.requires_confirmation
    assert server.tool_requires_confirmation("convert_time")
    assert not server.tool_requires_confirmation("get_current_time")
    bad = staff_client.post(change, {**form, "confirm_tools": ["made_up"]})
    assert bad.status_code == 200 and "Select a valid choice" in bad.content.decode()


def test_the_name_help_says_how_the_model_sees_the_tools(admin_client) -> None:
    """Issue 47: "<name>__<tool>" in the help was read as HTML tags, leaving "as __."."""
    page = admin_client.get("/admin/tools/mcpserver/add/").content.decode()
    assert "the model sees its tools as name__tool" in page
    assert "github__search" in page and "as __." not in page
