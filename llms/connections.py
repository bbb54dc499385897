"""The LLM clients' way out: the running loop's shared connections when it has them."""

from __future__ import annotations

import httpx

from core import runtime
from engine.llm.openai import ConnectionPool, new_transport


class RuntimeConnections(httpx.AsyncBaseTransport):
    """Sends through the connection pool of the running loop's runtime (the process's runs
    share it); on a loop without one (a probe from an admin page's thread) through
    connections of its own, closed with the client.

    Looked up per request, not when the client is built: clients are built in database
    threads and used on the run loop.
    """

    def __init__(self) -> None:
        self._own: httpx.AsyncBaseTransport | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        pool = runtime.part_or_none(ConnectionPool)
        if pool is not None:
            return await pool.transport.handle_async_request(request)
        if self._own is None:
            self._own = new_transport()
        return await self._own.handle_async_request(request)

    async def aclose(self) -> None:
        """Close the connections of its own; the runtime's pool stays open."""
        own, self._own = self._own, None
        if own is not None:
            await own.aclose()
