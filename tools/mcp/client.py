"""Talk to one MCP server: list its tools, call one.

Framework-free on purpose (no Django), so the same code serves the admin's "check
connection", the run's tool calls and the tests. Every step is bounded by the endpoint's
timeout. By default sessions are reused through :mod:`tools.mcp.pool` (starting a stdio
server costs seconds; a run may call it many times); ``reuse=False`` opens a private
session (:mod:`tools.mcp.connection`) and closes it afterwards, which is what synchronous
callers (``async_to_sync``: a throwaway event loop) must use.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp import Client, MCPError

from engine import Artifact, ToolResult
from tools.mcp.connection import MCPConnection, mcp_connect
from tools.mcp.endpoints import MCPConnectionError, MCPEndpoint, MCPToolInfo
from tools.mcp.pool import session_pool

__all__ = [
    "MCPConnection",
    "MCPConnectionError",
    "MCPEndpoint",
    "MCPToolInfo",
    "mcp_call_tool",
    "mcp_connect",
    "mcp_list_tools",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


async def _with_connection(
    endpoint: MCPEndpoint, reuse: bool, operation: Callable[[Client], Awaitable[T]]
) -> T:
    pool = session_pool() if reuse else None
    if pool is None:  # asked so, or a loop without the process's runtime (one-off session)
        done: list[T] = []
        try:
            async with mcp_connect(endpoint) as connection:
                done.append(await connection.run(operation))
        except MCPConnectionError as exc:
            if not done:
                raise
            logger.warning("MCP %s: error while closing the session: %s", endpoint.name, exc)
        return done[0]
    return await pool.run(endpoint, operation)


async def mcp_list_tools(endpoint: MCPEndpoint, *, reuse: bool = True) -> list[MCPToolInfo]:
    """Every tool the server offers (all pages)."""

    async def list_all(client: Client) -> list[MCPToolInfo]:
        tools: list[MCPToolInfo] = []
        cursor: str | None = None
        for _page in range(100):
            result = await client.list_tools(cursor=cursor, cache_mode="refresh")
            for item in result.tools:
                schema = item.input_schema if isinstance(item.input_schema, dict) else {}
                tools.append(MCPToolInfo(item.name, item.description or "", dict(schema)))
            cursor = getattr(result, "next_cursor", None)
            if not cursor:
                break
        return tools

    return await _with_connection(endpoint, reuse, list_all)


async def mcp_call_tool(
    endpoint: MCPEndpoint, name: str, arguments: dict[str, Any], *, reuse: bool = True
) -> ToolResult:
    """Call ``name``; errors the server reports come back as an error ToolResult."""
    try:
        result = await _with_connection(endpoint, reuse, lambda c: c.call_tool(name, arguments))
    except MCPError as exc:
        return ToolResult(
            f"Error: MCP server '{endpoint.name}' refused the call: {exc}", is_error=True
        )
    return _to_tool_result(name, result)


def _to_tool_result(name: str, result: Any) -> ToolResult:
    """Text blocks joined; images, audio and binary resources become artifacts."""
    texts: list[str] = []
    artifacts: list[Artifact] = []
    for n, block in enumerate(getattr(result, "content", None) or []):
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            data = base64.b64decode(block.data)
            mime = block.mime_type or "application/octet-stream"
            ext = mime.rsplit("/", 1)[-1].split("+", 1)[0]
            artifacts.append(Artifact(f"{name}-{n}.{ext}", mime, len(data), None, data))
        elif kind == "resource":
            resource = block.resource
            if getattr(resource, "text", None) is not None:
                texts.append(resource.text)
            elif getattr(resource, "blob", None):
                data = base64.b64decode(resource.blob)
                label = str(resource.uri).rstrip("/").rsplit("/", 1)[-1] or f"{name}-{n}"
                mime = resource.mime_type or "application/octet-stream"
                artifacts.append(Artifact(label, mime, len(data), None, data))
        elif kind == "resource_link":
            texts.append(f"[{getattr(block, 'name', '') or 'resource'}] {block.uri}")
    structured = getattr(result, "structured_content", None)
    if not texts and structured is not None:
        texts.append(json.dumps(structured, ensure_ascii=False, indent=2))
    content = "\n".join(texts) or ("(no output)" if not artifacts else "")
    is_error = bool(getattr(result, "is_error", False))
    return ToolResult(content, "text", artifacts, is_error=is_error)
