"""MCP servers for a run: which servers a user may use, their tools, and health upkeep.

The tool list of each server is cached on its row (``tools_cache``) by
:func:`mcp_server_refresh` (admin save, the admin action, or a periodic job), so building
a run's registry never opens a connection. Calls go to the server live; a failure becomes
an error observation and marks the server unhealthy in the admin. The SDK
(:mod:`tools.mcp.client`) is imported only to build a server's tools or to talk to it:
reading the rows, as every run does, leaves it unloaded (:mod:`tools.mcp.endpoints`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jsonschema
from asgiref.sync import async_to_sync, sync_to_async
from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

import engine
from core import configcache
from tools.artifacts import persist_artifacts
from tools.mcp.endpoints import MCPConnectionError, MCPEndpoint, MCPToolInfo
from tools.models import MCPServer
from tools.registry import ToolContext

__all__ = [
    "amcp_server_refresh",
    "mcp_endpoint_for",
    "mcp_server_refresh",
    "mcp_servers_for_user",
    "mcp_tool_name",
    "mcp_tools_for_server",
    "mcp_tools_for_user",
]

logger = logging.getLogger(__name__)

MAX_TOOL_NAME = 64
MAX_DESCRIPTION = 1000
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


def mcp_endpoint_for(server: MCPServer) -> MCPEndpoint:
    return MCPEndpoint(
        name=server.name,
        transport=server.transport,
        command=server.command,
        args=tuple(str(a) for a in (server.args or [])),
        env=server.env_dict,
        url=server.url,
        headers=server.headers_dict,
        timeout=float(server.timeout or 30.0),
    )


def mcp_servers_for_user(*, user: Any) -> QuerySet[MCPServer]:
    """Enabled servers open to every user (no groups) or to one of the user's groups.

    Same rule as :func:`tools.selectors.toolconfigs_for_user`: anonymous users get none.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return MCPServer.objects.none()
    links = MCPServer.allowed_groups.through.objects.filter(mcpserver_id=OuterRef("pk"))
    mine = links.filter(group_id__in=user.groups.values("pk"))
    return MCPServer.objects.filter(enabled=True).filter(~Exists(links) | Exists(mine))


def mcp_tool_name(server_name: str, tool_name: str) -> str:
    """``<server>__<tool>`` in [A-Za-z0-9_-], at most 64 characters (OpenAI's limit).

    A name that has to be cut keeps a short hash of the original so two long names that
    share a prefix stay distinct.
    """
    prefix = _UNSAFE.sub("_", server_name).strip("_") or "mcp"
    tool = _UNSAFE.sub("_", tool_name).strip("_") or "tool"
    name = f"{prefix}__{tool}"
    if len(name) <= MAX_TOOL_NAME:
        return name
    digest = hashlib.sha1(f"{server_name}/{tool_name}".encode()).hexdigest()[:6]
    return f"{name[: MAX_TOOL_NAME - 7]}_{digest}"


def _clean_schema(schema: Any) -> dict[str, Any]:
    """The tool's input schema if usable, else an open object schema."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    schema = {k: v for k, v in schema.items() if k != "$schema"}
    schema.setdefault("type", "object")
    if schema.get("type") != "object":
        return {"type": "object", "properties": {}}
    schema.setdefault("properties", {})
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError:
        return {"type": "object", "properties": {}}
    return schema


def _build_tool(
    server: MCPServer, endpoint: MCPEndpoint, info: dict[str, Any], exposed: str
) -> engine.Tool:
    from tools.mcp.client import mcp_call_tool  # the SDK is slow to import: on first use

    remote_name = str(info["name"])
    server_id = server.pk
    was_healthy = server.health_status == MCPServer.Health.OK

    async def call(**arguments: Any) -> engine.ToolResult:
        nonlocal was_healthy
        try:
            result = await mcp_call_tool(endpoint, remote_name, arguments)
        except MCPConnectionError as exc:
            was_healthy = False
            await sync_to_async(_record_health)(server_id, error=str(exc))
            return engine.ToolResult(f"Error: {exc}", is_error=True)
        if not was_healthy:
            was_healthy = True
            await sync_to_async(_record_health)(server_id, error="")
        return result

    description = " ".join(str(info.get("description") or remote_name).split())
    return engine.Tool(
        name=exposed,
        description=f"[{server.name}] {description[:MAX_DESCRIPTION]}",
        parameters=_clean_schema(info.get("input_schema")),
        func=call,
        timeout=endpoint.timeout + 5,
        # The admin's switch on the server's row covers each of its tools; the row's
        # list names more.
        requires_confirmation=server.tool_requires_confirmation(remote_name),
        preview=lambda arguments: mcp_call_preview(endpoint, remote_name),
    )


def mcp_call_preview(endpoint: MCPEndpoint, remote_name: str) -> dict[str, Any]:
    """What a call of an MCP tool sends, for its approval card: the server and the tool,
    and for a server over HTTP its URL and the names of the headers it adds (never their
    values; [] when the administrator set none). The URL without its user part, query or
    fragment: some servers take a key there. The arguments show beside it."""
    preview: dict[str, Any] = {"server": endpoint.name, "tool": remote_name}
    if endpoint.url and endpoint.transport != MCPServer.Transport.STDIO:
        parts = urlsplit(endpoint.url)
        netloc = parts.netloc.rpartition("@")[2]
        preview["url"] = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        preview["credentials"] = sorted(endpoint.headers or {}, key=str.lower)
    return preview


def mcp_tool_listing(server: MCPServer) -> list[tuple[str, dict[str, Any]]]:
    """The server's cached tools as the model sees them: (exposed name, listing entry)."""
    listing: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    for info in server.tools_cache or []:
        if not isinstance(info, dict) or not info.get("name"):
            continue
        exposed = mcp_tool_name(server.name, str(info["name"]))
        if exposed in seen:
            exposed = mcp_tool_name(server.name, f"{info['name']}_{len(seen)}")
        seen.add(exposed)
        listing.append((exposed, info))
    return listing


def mcp_tools_for_server(server: MCPServer, context: ToolContext) -> list[engine.Tool]:
    """Engine tools for one server, from its cached listing (no connection made)."""
    if not server.tools_cache:
        return []
    endpoint = mcp_endpoint_for(server)
    tools: list[engine.Tool] = []
    for exposed, info in mcp_tool_listing(server):
        try:
            tools.append(_build_tool(server, endpoint, info, exposed))
        except (ValueError, jsonschema.SchemaError) as exc:
            logger.warning("MCP %s: skipping tool %r: %s", server.name, info.get("name"), exc)
    return persist_artifacts(tools, context)


def mcp_tools_described_for_user(*, user: Any) -> list[dict[str, Any]]:
    """Name, description, confirmation flag and server of each MCP tool ``user`` may use
    (from the cached listings: no connection made)."""
    described = []
    for server in mcp_servers_for_user(user=user):
        for exposed, info in mcp_tool_listing(server):
            description = " ".join(str(info.get("description") or info["name"]).split())
            described.append(
                {
                    "name": exposed,
                    "description": description[:MAX_DESCRIPTION],
                    "requires_confirmation": server.tool_requires_confirmation(str(info["name"])),
                    "server": server.name,
                }
            )
    return described


def mcp_tools_for_user(*, user: Any, context: ToolContext) -> list[engine.Tool]:
    """Every MCP tool ``user`` may use in a run (sync: call via sync_to_async from async)."""
    return mcp_tools_for_servers(mcp_servers_for_user(user=user), context=context)


def mcp_tools_for_servers(
    servers: Iterable[MCPServer], *, context: ToolContext
) -> list[engine.Tool]:
    """The tools of ``servers`` for one run, from their cached tool lists.

    Servers never listed yet (no cache) are skipped; the admin's save and "Check
    connection / refresh tools" action fill the cache.
    """
    tools: list[engine.Tool] = []
    for server in servers:
        if server.tools_cache is None:
            logger.info("MCP server %s has no cached tool list yet; skipped", server.name)
            continue
        tools.extend(mcp_tools_for_server(server, context))
    return tools


def _record_health(server_id: int, *, error: str, tools: list[MCPToolInfo] | None = None) -> None:
    now = timezone.now()
    fields: dict[str, Any] = {
        "health_status": MCPServer.Health.ERROR if error else MCPServer.Health.OK,
        "last_error": error[:4000],
        "last_checked_at": now,
    }
    if tools is not None:
        fields["tools_cache"] = [t.to_dict() for t in tools]
        fields["tools_refreshed_at"] = now
    with transaction.atomic():
        MCPServer.objects.filter(pk=server_id).update(**fields)
        configcache.bump()  # runs build their MCP tools from tools_cache


def mcp_server_refresh(server: MCPServer) -> MCPServer:
    """Connect, list the tools, store them and the health on the row (sync)."""
    from tools.mcp.client import mcp_list_tools  # the SDK is slow to import: on first use

    try:
        # A private session: async_to_sync may run this on a throwaway event loop.
        tools = async_to_sync(mcp_list_tools)(mcp_endpoint_for(server), reuse=False)
    except MCPConnectionError as exc:
        _record_health(server.pk, error=str(exc))
    else:
        _record_health(server.pk, error="", tools=tools)
    server.refresh_from_db()
    return server


async def amcp_server_refresh(server: MCPServer) -> MCPServer:
    """:func:`mcp_server_refresh` for async callers (reuses the loop's pooled session)."""
    from tools.mcp.client import mcp_list_tools  # the SDK is slow to import: on first use

    endpoint = await sync_to_async(mcp_endpoint_for)(server)
    try:
        tools = await mcp_list_tools(endpoint)
    except MCPConnectionError as exc:
        await sync_to_async(_record_health)(server.pk, error=str(exc))
    else:
        await sync_to_async(_record_health)(server.pk, error="", tools=tools)
    await server.arefresh_from_db()
    return server
