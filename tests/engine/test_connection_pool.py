"""The LLM clients' connection pool (engine.llm.pool) against real loopback servers:
reuse, the keep-alive limit, a full pool, queued and cancelled requests."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import httpx
import pytest

from engine.llm.netbackend import AsyncioHTTPTransport
from tests.engine.test_netbackend import reply


class Server:
    """A loopback HTTP/1.1 server that records its connections. A request whose body is
    a name in ``holds`` is answered only when that name's event is set."""

    def __init__(self) -> None:
        self.peers: list[object] = []
        self.closed: list[object] = []
        self.received: list[bytes] = []
        self.holds: dict[bytes, asyncio.Event] = {}
        self.changed = asyncio.Condition()
        self.port = 0

    async def until(self, predicate) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(predicate), 5)

    async def _note(self, log: list, item: object) -> None:
        async with self.changed:
            log.append(item)
            self.changed.notify_all()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        await self._note(self.peers, peer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                await self._note(self.received, body)
                if body in self.holds:
                    await self.holds[body].wait()
                writer.write(reply(b"re:" + body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await self._note(self.closed, peer)


@contextlib.asynccontextmanager
async def running() -> AsyncIterator[Server]:
    server = Server()
    tasks: set[asyncio.Task] = set()

    async def serve(reader, writer):
        tasks.add(asyncio.current_task())
        await server.serve(reader, writer)

    listener = await asyncio.start_server(serve, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def client(*, keep_alive: int = 64, max_connections: int | None = None) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=keep_alive)
    transport = AsyncioHTTPTransport(ssl_context=ssl.create_default_context(), limits=limits)
    return httpx.AsyncClient(transport=transport)


def pooled(http: httpx.AsyncClient) -> int:
    return len(http._transport._pool.connections)


async def post(http: httpx.AsyncClient, server: Server, body: bytes, **kw) -> str:
    response = await http.post(f"http://127.0.0.1:{server.port}/", content=body, **kw)
    return response.text


async def test_sequential_requests_share_one_connection():
    async with running() as server, client() as http:
        answers = [await post(http, server, b"%d" % i) for i in range(5)]

    assert answers == [f"re:{i}" for i in range(5)]
    assert len(server.peers) == 1


async def test_idle_connections_are_kept_while_others_are_busy():
    """The keep-alive limit counts idle connections only (httpcore 1.0 counted all of
    them, closing every idle connection while the pool held more than the limit)."""
    async with running() as server, client(keep_alive=2) as http:
        server.holds = {name: asyncio.Event() for name in (b"a", b"b", b"c", b"d")}
        held = {name: asyncio.ensure_future(post(http, server, name)) for name in server.holds}
        await server.until(lambda: len(server.received) == 4)
        for name in (b"a", b"b"):
            server.holds[name].set()
            await held[name]
        # two busy, two idle: the next requests reuse the idle ones
        assert await post(http, server, b"x") == "re:x"
        assert await post(http, server, b"y") == "re:y"
        assert len(server.peers) == 4
        for name in (b"c", b"d"):
            server.holds[name].set()
        await asyncio.gather(*held.values())
        await server.until(lambda: len(server.closed) == 2)  # four idle, two over the limit

        assert pooled(http) == 2


async def test_idle_connections_beyond_the_keep_alive_limit_are_closed():
    async with running() as server, client(keep_alive=1) as http:
        server.holds = {name: asyncio.Event() for name in (b"a", b"b", b"c")}
        held = [asyncio.ensure_future(post(http, server, name)) for name in server.holds]
        await server.until(lambda: len(server.received) == 3)
        for event in server.holds.values():
            event.set()
        assert await asyncio.gather(*held) == ["re:a", "re:b", "re:c"]
        await server.until(lambda: len(server.closed) == 2)

        assert pooled(http) == 1
        assert await post(http, server, b"again") == "re:again"
        assert len(server.peers) == 3  # the one kept was reused


async def test_a_full_pool_queues_requests_until_a_connection_is_free():
    async with running() as server, client(max_connections=1) as http:
        server.holds = {b"first": asyncio.Event()}
        first = asyncio.ensure_future(post(http, server, b"first"))
        await server.until(lambda: server.received == [b"first"])
        second = asyncio.ensure_future(post(http, server, b"second"))
        for _ in range(1000):  # until it waits in the pool (each turn lets it progress)
            if len(http._transport._pool._requests) == 2:
                break
            await asyncio.sleep(0)
        assert len(http._transport._pool._requests) == 2
        server.holds[b"first"].set()

        assert await asyncio.gather(first, second) == ["re:first", "re:second"]
        assert len(server.peers) == 1


async def test_a_full_pool_replaces_an_idle_connection_to_another_origin():
    async with running() as one, running() as other, client(max_connections=1) as http:
        assert await post(http, one, b"a") == "re:a"
        assert await post(http, other, b"b") == "re:b"
        await one.until(lambda: len(one.closed) == 1)

        assert pooled(http) == 1 and len(other.peers) == 1


async def test_a_request_that_timed_out_waiting_leaves_the_pool_usable():
    async with running() as server, client(max_connections=1) as http:
        server.holds = {b"slow": asyncio.Event()}
        slow = asyncio.ensure_future(post(http, server, b"slow"))
        await server.until(lambda: server.received == [b"slow"])
        with pytest.raises(httpx.PoolTimeout):
            await post(http, server, b"gives up", timeout=httpx.Timeout(5, pool=0.05))
        server.holds[b"slow"].set()

        assert await slow == "re:slow"
        assert await post(http, server, b"next") == "re:next"
        assert server.received == [b"slow", b"next"] and len(server.peers) == 1
