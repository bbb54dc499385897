"""Talk to one MCP server with the official SDK (``mcp``): list its tools, call one.

Framework-free on purpose (no Django): :class:`MCPEndpoint` carries what a row says, so
the same code serves the admin's "check connection", the run's tool calls and the tests.
Every step is bounded by the endpoint's timeout. By default sessions are reused through
:mod:`tools.mcp.pool` (starting a stdio server costs seconds; a run may call it many
times); ``reuse=False`` opens a private session and closes it afterwards, which is what
synchronous callers (``async_to_sync``: a throwaway event loop) must use.

Failures to start, reach or hear from a server become :class:`MCPConnectionError` with a
message a model or an admin can read, including the tail of a stdio server's stderr.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import IO, Any, TypeVar

import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED

from engine import Artifact, ToolResult
from tools.mcp.endpoints import MCPConnectionError, MCPEndpoint, MCPToolInfo

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

STDERR_TAIL = 600
T = TypeVar("T")


@dataclass
class MCPConnection:
    """An initialised SDK client plus what is needed to explain its failures."""

    endpoint: MCPEndpoint
    client: Client
    errlog: IO[str]

    def stderr_tail(self) -> str:
        return _stderr_tail(self.errlog)

    async def alive(self) -> bool:
        """Whether the server still answers (checked before reusing an idle session).

        A stdio server process may have died since the last call; HTTP requests stand on
        their own, so only stdio is probed. The probe is an uncached tools/list (``ping``
        is gone from the 2026 protocol revision), idempotent and cheap over a pipe.
        """
        if self.endpoint.transport != "stdio":
            return True
        try:
            await self.run(lambda client: client.list_tools(cache_mode="bypass"))
        except (MCPConnectionError, MCPError):
            return False
        return True

    async def run(self, operation: Callable[[Client], Awaitable[T]]) -> T:
        """``operation(client)`` within the timeout; transport failures translated.

        :class:`mcp.MCPError` (the server answered with a JSON-RPC error) passes through:
        the session is still good.
        """
        name, timeout = self.endpoint.name, self.endpoint.timeout
        try:
            async with asyncio.timeout(timeout):
                return await operation(self.client)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:  # the process died or the stream broke
                raise MCPConnectionError(
                    f"MCP server '{name}' closed the connection" + self.stderr_tail()
                ) from None
            raise
        except MCPConnectionError:
            raise
        except TimeoutError:
            raise MCPConnectionError(
                f"MCP server '{name}' did not answer within {timeout:g} s" + self.stderr_tail()
            ) from None
        except Exception as exc:
            raise MCPConnectionError(
                f"MCP server '{name}' failed: {_describe(exc)}" + self.stderr_tail()
            ) from None


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(_leaf_errors(inner))
        return leaves
    return [exc]


def _describe(exc: BaseException) -> str:
    parts: list[str] = []
    for leaf in _leaf_errors(exc):
        text = str(leaf).strip() or type(leaf).__name__
        if text not in parts:
            parts.append(text)
    return "; ".join(parts)


def _stderr_tail(errlog: IO[str]) -> str:
    try:
        errlog.flush()
        errlog.seek(0)
        text = errlog.read().strip()
        errlog.seek(0, 2)
    except (OSError, ValueError):
        return ""
    return f"\nserver stderr: ...{text[-STDERR_TAIL:]}" if text else ""


def _transport(endpoint: MCPEndpoint, errlog: IO[str]) -> tuple[Any, httpx2.AsyncClient | None]:
    if endpoint.transport == "stdio":
        if not endpoint.command:
            raise MCPConnectionError(f"MCP server '{endpoint.name}' has no command")
        params = StdioServerParameters(
            command=endpoint.command, args=list(endpoint.args), env=dict(endpoint.env) or None
        )
        return stdio_client(params, errlog=errlog), None
    if not endpoint.url:
        raise MCPConnectionError(f"MCP server '{endpoint.name}' has no URL")
    http_client = httpx2.AsyncClient(
        headers=endpoint.headers or None,
        timeout=httpx2.Timeout(endpoint.timeout),
        follow_redirects=False,
    )
    return streamable_http_client(endpoint.url, http_client=http_client), http_client


@asynccontextmanager
async def mcp_connect(endpoint: MCPEndpoint) -> AsyncIterator[MCPConnection]:
    """An initialised session; only connecting is bounded here (see MCPConnection.run)."""
    name = endpoint.name
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace") as errlog:
        transport, http_client = _transport(endpoint, errlog)
        try:
            async with AsyncExitStack() as stack:
                if http_client is not None:
                    stack.push_async_callback(http_client.aclose)
                try:
                    async with asyncio.timeout(endpoint.timeout):
                        client = await stack.enter_async_context(
                            Client(transport, read_timeout_seconds=endpoint.timeout)
                        )
                except TimeoutError:
                    raise MCPConnectionError(
                        f"MCP server '{name}' did not answer within {endpoint.timeout:g} s"
                        + _stderr_tail(errlog)
                    ) from None
                yield MCPConnection(endpoint, client, errlog)
        except (MCPConnectionError, MCPError):
            raise
        except Exception as exc:
            raise MCPConnectionError(
                f"MCP server '{name}' failed: {_describe(exc)}" + _stderr_tail(errlog)
            ) from None


async def _with_connection(
    endpoint: MCPEndpoint, reuse: bool, operation: Callable[[Client], Awaitable[T]]
) -> T:
    if not reuse:
        done: list[T] = []
        try:
            async with mcp_connect(endpoint) as connection:
                done.append(await connection.run(operation))
        except MCPConnectionError as exc:
            if not done:
                raise
            logger.warning("MCP %s: error while closing the session: %s", endpoint.name, exc)
        return done[0]
    from tools.mcp.pool import session_pool  # the pool imports this module

    return await session_pool().run(endpoint, operation)


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
