"""MCP hub against real servers: the reference time server (PyPI: mcp-server-time) over
stdio, and the same server's code over streamable HTTP on a loopback port."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group

from conversations.runtime import build
from core import runtime
from tests.tools.conftest import TIME_SERVER_STDIO_ARGS, free_port
from tools.mcp.client import MCPConnectionError, MCPEndpoint, mcp_call_tool, mcp_list_tools
from tools.mcp.pool import session_pool
from tools.mcp.services import (
    amcp_server_refresh,
    mcp_server_refresh,
    mcp_servers_for_user,
    mcp_tool_name,
    mcp_tools_for_user,
)
from tools.models import MCPServer
from tools.registry import ToolContext

STDIO = MCPEndpoint(
    name="time", transport="stdio", command=sys.executable, args=TIME_SERVER_STDIO_ARGS, timeout=20
)
# One event loop for the module, so the pooled stdio session is started once, not per test.
module_loop = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module", autouse=True)
async def module_runtime():
    """A runtime on the module's loop: its session pool serves every test, then closes."""
    started = runtime.start_on(asyncio.get_running_loop(), build, primary=False)
    yield started
    await started.aclose()


@module_loop
async def test_stdio_lists_calls_and_reports_server_errors():
    tools = {t.name: t for t in await mcp_list_tools(STDIO)}
    session = session_pool()._sessions[STDIO.key()]
    assert set(tools) == {"get_current_time", "convert_time"}
    assert tools["get_current_time"].input_schema["required"] == ["timezone"]
    result = await mcp_call_tool(STDIO, "get_current_time", {"timezone": "Asia/Tokyo"})
    assert not result.is_error
    assert json.loads(result.content)["timezone"] == "Asia/Tokyo"
    failed = await mcp_call_tool(STDIO, "get_current_time", {"timezone": "Mars/Olympus"})
    assert failed.is_error and "Invalid timezone" in failed.content
    assert session_pool()._sessions[STDIO.key()] is session  # one process served all three


def _time_server_children() -> list[int]:
    """PIDs of stdio time servers this test process started (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"-m\0mcp_server_time\0" in cmdline:
            found.append(int(entry.name))
    return found


@module_loop
async def test_pooled_session_survives_a_dead_server(monkeypatch):
    await mcp_call_tool(STDIO, "get_current_time", {"timezone": "UTC"})
    (pid,) = _time_server_children()
    os.kill(pid, signal.SIGKILL)
    await asyncio.sleep(0.2)
    monkeypatch.setattr("tools.mcp.pool.PING_AFTER_IDLE", 0.0)
    result = await mcp_call_tool(STDIO, "get_current_time", {"timezone": "Europe/Oslo"})
    assert not result.is_error and "Europe/Oslo" in result.content
    assert _time_server_children() != [pid]
    concurrent = await asyncio.gather(
        *(
            mcp_call_tool(STDIO, "get_current_time", {"timezone": tz})
            for tz in ("UTC", "Asia/Dubai")
        )
    )
    assert [json.loads(r.content)["timezone"] for r in concurrent] == ["UTC", "Asia/Dubai"]


@module_loop
async def test_streamable_http(mcp_http_url):
    endpoint = MCPEndpoint(
        name="clock", transport="http", url=mcp_http_url, headers={"X-Trace": "1"}, timeout=20
    )
    assert {t.name for t in await mcp_list_tools(endpoint)} == {"get_current_time", "convert_time"}
    result = await mcp_call_tool(
        endpoint,
        "convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Kolkata"},
        reuse=False,
    )
    assert json.loads(result.content)["target"]["datetime"].endswith("17:30:00+05:30")


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        (
            MCPEndpoint(name="nope", transport="stdio", command="/nonexistent/mcp-server"),
            "MCP server 'nope' failed",
        ),
        (
            MCPEndpoint(
                name="crash",
                transport="stdio",
                command=sys.executable,
                args=("-c", "import sys; sys.stderr.write('missing API key'); sys.exit(3)"),
                timeout=10,
            ),
            "missing API key",
        ),
        (
            MCPEndpoint(
                name="down", transport="http", url=f"http://127.0.0.1:{free_port()}/mcp", timeout=5
            ),
            "MCP server 'down' failed",
        ),
    ],
)
@module_loop
async def test_connection_failures_are_clear(endpoint, message):
    with pytest.raises(MCPConnectionError, match=message):
        await mcp_list_tools(endpoint)
    with pytest.raises(MCPConnectionError, match=message):
        await mcp_list_tools(endpoint, reuse=False)
    assert endpoint.key() not in session_pool()._sessions  # a failed session is not kept


@module_loop
async def test_a_silent_server_times_out():
    mute = MCPEndpoint(
        name="mute",
        transport="stdio",
        command=sys.executable,
        args=("-c", "import time; time.sleep(60)"),
        timeout=1,
    )
    with pytest.raises(MCPConnectionError, match="did not answer within 1 s"):
        await mcp_list_tools(mute)


def test_tool_names_are_sanitised_and_bounded():
    assert mcp_tool_name("time", "get_current_time") == "time__get_current_time"
    assert mcp_tool_name("my-files", "read file/v2") == "my-files__read_file_v2"
    long_a = mcp_tool_name("server", "x" * 80 + "a")
    long_b = mcp_tool_name("server", "x" * 80 + "b")
    assert len(long_a) == 64 and long_a != long_b


# --- Django side: rows, groups, health --------------------------------------------------


def _stdio_row(name: str = "time", **fields) -> MCPServer:
    row = MCPServer(
        name=name, transport="stdio", command=sys.executable, args=list(TIME_SERVER_STDIO_ARGS),
        timeout=20, **fields,
    )  # fmt: skip
    row.full_clean()
    row.save()
    return row


@module_loop
@pytest.mark.django_db(transaction=True)
async def test_refresh_caches_tools_and_tools_are_callable(user):
    row = await sync_to_async(_stdio_row)()
    row = await amcp_server_refresh(row)
    assert row.health_status == "ok" and row.tool_count == 2 and row.last_error == ""
    tools = await sync_to_async(mcp_tools_for_user)(user=user, context=ToolContext())
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"time__get_current_time", "time__convert_time"}
    assert by_name["time__get_current_time"].description.startswith("[time] Get current time")
    result = await by_name["time__get_current_time"].invoke({"timezone": "Europe/Paris"})
    assert "Europe/Paris" in result.content


@module_loop
@pytest.mark.django_db(transaction=True)
async def test_call_failure_marks_the_server_unhealthy(user):
    cache = [{"name": "ping", "description": "Ping", "input_schema": {"type": "object"}}]
    await MCPServer.objects.acreate(
        name="gone", command="/nonexistent/mcp", tools_cache=cache, health_status="ok"
    )
    (tool,) = await sync_to_async(mcp_tools_for_user)(user=user, context=ToolContext())
    result = await tool.invoke({})
    row = await MCPServer.objects.aget(name="gone")
    assert result.is_error and "MCP server 'gone' failed" in result.content
    assert row.health_status == "error" and "failed" in row.last_error


@pytest.mark.django_db
def test_sync_refresh_records_health(mcp_http_url):
    """The admin's path: a private session on a throwaway loop, health stored on the row."""
    row = MCPServer.objects.create(name="clock", transport="http", url=mcp_http_url, timeout=20)
    row = mcp_server_refresh(row)
    assert row.health_status == "ok" and row.tool_count == 2 and row.tools_refreshed_at
    MCPServer.objects.filter(pk=row.pk).update(url=f"http://127.0.0.1:{free_port()}/mcp")
    row.refresh_from_db()
    row = mcp_server_refresh(row)
    assert row.health_status == "error" and "failed" in row.last_error
    assert row.tool_count == 2  # the last good listing is kept


@pytest.mark.django_db
def test_servers_for_user_respect_enabled_and_groups(user, other_user):
    staff = Group.objects.create(name="staff")
    user.groups.add(staff)
    cache = [{"name": "ping", "description": "Ping", "input_schema": {"type": "object"}}]
    MCPServer.objects.create(name="open", command="x", tools_cache=cache)
    MCPServer.objects.create(name="off", command="x", enabled=False, tools_cache=cache)
    restricted = MCPServer.objects.create(name="team", command="x", tools_cache=cache)
    restricted.allowed_groups.add(staff)
    MCPServer.objects.create(name="unlisted", command="x")  # never refreshed

    def names(u):
        return sorted(s.name for s in mcp_servers_for_user(user=u))

    assert names(user) == ["open", "team", "unlisted"]
    assert names(other_user) == ["open", "unlisted"]
    tools = mcp_tools_for_user(user=user, context=ToolContext())
    assert sorted(t.name for t in tools) == ["open__ping", "team__ping"]
    from django.contrib.auth.models import AnonymousUser

    assert names(AnonymousUser()) == []


@pytest.mark.django_db
def test_secrets_are_encrypted_at_rest():
    row = MCPServer.objects.create(name="s", transport="http", url="https://mcp.example/mcp")
    row.headers_dict = {"Authorization": "Bearer top-secret"}
    row.save()
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT headers FROM tools_mcpserver WHERE id = %s", [row.pk])
        (raw,) = cursor.fetchone()
    assert "top-secret" not in raw and raw.startswith("fernet:")
    assert MCPServer.objects.get(pk=row.pk).headers_dict == {"Authorization": "Bearer top-secret"}


@pytest.mark.django_db
def test_model_validation():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as exc:
        MCPServer(name="bad name!", transport="http", url="ftp://x").full_clean()
    assert {"name", "url"} <= set(exc.value.message_dict)
    with pytest.raises(ValidationError, match="needs a command"):
        MCPServer(name="ok", transport="stdio").full_clean()


@pytest.mark.django_db
def test_which_tools_wait_for_approval_the_switch_and_the_ticked_ones(user):
    """The server's switch covers every tool (those it adds later too); with it off, only
    the tools ticked on its row ask. A run's tools carry it (the loop asks then)."""
    cache = [
        {"name": name, "description": name, "input_schema": {"type": "object"}}
        for name in ("read_page", "delete_page")
    ]
    MCPServer.objects.create(name="all", command="x", tools_cache=cache, requires_confirmation=True)
    MCPServer.objects.create(
        name="some", command="x", tools_cache=cache, confirm_tools=["delete_page"]
    )
    MCPServer.objects.create(name="none", command="x", tools_cache=cache)

    tools = mcp_tools_for_user(user=user, context=ToolContext())

    asks = {t.name: t.confirmation_reason({}) is not None for t in tools}
    assert asks == {
        "all__read_page": True, "all__delete_page": True,
        "some__read_page": False, "some__delete_page": True,
        "none__read_page": False, "none__delete_page": False,
    }  # fmt: skip


@pytest.mark.django_db
def test_tools_that_require_confirmation_must_be_a_list_of_names():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as exc:
        MCPServer(name="ok", command="x", confirm_tools={"delete_page": True}).full_clean()
    assert set(exc.value.message_dict) == {"confirm_tools"}
    MCPServer(name="ok", command="x", confirm_tools=["delete_page"]).full_clean()
