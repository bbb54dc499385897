"""Open one session with an MCP server through the official SDK (``mcp``).

Framework-free on purpose (no Django): :class:`MCPEndpoint` carries what a row says.
Failures to start, reach or hear from a server become :class:`MCPConnectionError` with a
message a model or an admin can read, including the tail of a stdio server's stderr.
:mod:`tools.mcp.pool` keeps sessions open; :mod:`tools.mcp.client` runs operations on them.
"""

from __future__ import annotations

import asyncio
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

from tools.mcp.endpoints import MCPConnectionError, MCPEndpoint

__all__ = ["MCPConnection", "MCPConnectionError", "MCPEndpoint", "mcp_connect"]


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
