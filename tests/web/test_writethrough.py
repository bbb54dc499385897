"""Daphne's connections send a write at once, and lose or reorder nothing when the socket
cannot take it all (real sockets, Twisted's asyncio reactor on its own loop)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest
from twisted.internet.asyncioreactor import AsyncioSelectorReactor
from twisted.internet.protocol import Protocol

from agentsite.writethrough import WriteThroughServer


@pytest.fixture
def reactor() -> Iterator[AsyncioSelectorReactor]:
    loop = asyncio.new_event_loop()
    try:
        yield AsyncioSelectorReactor(eventloop=loop)
    finally:
        loop.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server_side, client_side = socket.socketpair()
    try:
        yield server_side, client_side
    finally:
        server_side.close()
        client_side.close()


def connection(reactor, server_side: socket.socket) -> WriteThroughServer:
    return WriteThroughServer(server_side, Protocol(), ("127.0.0.1", 1), None, 0, reactor)


def test_a_write_is_on_the_wire_before_the_reactor_turns(reactor, pair) -> None:
    server_side, client_side = pair
    transport = connection(reactor, server_side)

    transport.write(b"frame one")
    transport.writeSequence([b" and ", b"frame two"])

    client_side.settimeout(1)
    assert client_side.recv(100) == b"frame one and frame two"
    assert transport not in reactor.getWriters()  # nothing left for the reactor to send
    reactor.removeReader(transport)


def test_what_the_socket_cannot_take_is_sent_later_in_order(reactor, pair) -> None:
    server_side, client_side = pair
    server_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    transport = connection(reactor, server_side)
    chunks = [bytes([65 + i % 26]) * 50_000 for i in range(40)]  # far beyond the buffer

    for chunk in chunks:
        transport.write(chunk)
    assert transport in reactor.getWriters()  # the rest waits for the reactor

    received = bytearray()
    client_side.setblocking(False)

    async def drain() -> None:
        loop = asyncio.get_running_loop()
        while len(received) < sum(map(len, chunks)):
            received.extend(await loop.sock_recv(client_side, 65536))

    reactor._asyncioEventloop.run_until_complete(asyncio.wait_for(drain(), 10))
    assert bytes(received) == b"".join(chunks)
    reactor.removeReader(transport)
