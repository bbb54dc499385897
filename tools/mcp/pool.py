"""Reusable MCP sessions: one per server settings and event loop, closed when idle.

Starting a stdio server (a Python or Node process) takes seconds, and a run may call its
tools many times, so sessions outlive a single call. Each session is owned by one
background task, which opens it (``mcp_connect``) and keeps it open until it has been idle
for ``idle_timeout`` seconds, is discarded after a failure, or the loop shuts down
(``asyncio.run`` cancels the task, which closes the session and stops the process).
Calls run in the caller's task, concurrently, on the shared session.

Sessions are bound to the loop that opened them, so a pool belongs to one loop: the
process's runtime holds the pool of its run loop (the embedded server's, a worker's) and
closes it when the process stops. A loop without a runtime opens a session per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from core import runtime
from tools.mcp.endpoints import MCPConnectionError, MCPEndpoint

if TYPE_CHECKING:
    from mcp import Client

    from tools.mcp.connection import MCPConnection

__all__ = ["IDLE_TIMEOUT", "MCPSessionPool", "session_pool"]

logger = logging.getLogger(__name__)

IDLE_TIMEOUT = 120.0
PING_AFTER_IDLE = 1.0  # seconds without use after which a session is pinged before reuse
T = TypeVar("T")


class _Session:
    def __init__(self, pool: MCPSessionPool, endpoint: MCPEndpoint) -> None:
        loop = asyncio.get_running_loop()
        self.pool = pool
        self.endpoint = endpoint
        self.ready: asyncio.Future[MCPConnection] = loop.create_future()
        # Mark the outcome as retrieved even when no caller is left to await it.
        self.ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.stop = asyncio.Event()
        self.active = 0
        self.last_used = loop.time()
        self.closed = False
        self.task = loop.create_task(self._own(), name=f"mcp-session:{endpoint.name}")

    async def _own(self) -> None:
        # Here: the SDK is slow to import (and large): loaded by the first MCP session, not
        # by every process whose runtime holds a pool.
        from tools.mcp.connection import mcp_connect

        try:
            async with mcp_connect(self.endpoint) as connection:
                self.ready.set_result(connection)
                await self._wait_until_idle()
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                logger.info("MCP session %s ended: %s", self.endpoint.name, exc)
        finally:
            self.closed = True
            if not self.ready.done():
                self.ready.set_exception(
                    MCPConnectionError(f"MCP server '{self.endpoint.name}': session closed")
                )
            self.pool._forget(self)

    async def _wait_until_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while not self.stop.is_set():
            remaining = self.last_used + self.pool.idle_timeout - loop.time()
            if self.active == 0 and remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), timeout=max(remaining, 0.5))

    def close(self) -> None:
        self.closed = True
        self.stop.set()


class MCPSessionPool:
    def __init__(self, idle_timeout: float = IDLE_TIMEOUT) -> None:
        self.idle_timeout = idle_timeout
        self._sessions: dict[tuple[Any, ...], _Session] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def _session(self, endpoint: MCPEndpoint) -> _Session:
        key = endpoint.key()
        session = self._sessions.get(key)
        if session is None or session.closed:
            session = self._sessions[key] = _Session(self, endpoint)
        return session

    def _forget(self, session: _Session) -> None:
        key = session.endpoint.key()
        if self._sessions.get(key) is session:
            del self._sessions[key]

    async def run(self, endpoint: MCPEndpoint, operation: Callable[[Client], Awaitable[T]]) -> T:
        """``operation`` on the shared session; a broken session is dropped, not reused.

        A session idle for a while is pinged first (a server may have died meanwhile) and
        replaced when it does not answer, so the operation itself is never sent twice.
        """
        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            session = self._session(endpoint)
            reused = session.ready.done()
            idle = loop.time() - session.last_used
            session.active += 1
            try:
                connection = await asyncio.shield(session.ready)
                stale = attempt == 1 and reused and idle >= PING_AFTER_IDLE
                if stale and not await connection.alive():
                    logger.info("MCP session %s stopped answering; reconnecting", endpoint.name)
                    session.close()
                    continue
                return await connection.run(operation)
            except MCPConnectionError:
                session.close()
                raise
            finally:
                session.active -= 1
                session.last_used = loop.time()
        raise MCPConnectionError(f"MCP server '{endpoint.name}': could not reconnect")

    async def aclose(self) -> None:
        sessions = list(self._sessions.values())
        for session in sessions:
            session.close()
        await asyncio.gather(*(s.task for s in sessions), return_exceptions=True)


def session_pool() -> MCPSessionPool | None:
    """The running loop's pool (a part of the process's runtime), if it has one."""
    return runtime.part_or_none(MCPSessionPool)
