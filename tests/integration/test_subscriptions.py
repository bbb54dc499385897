"""Clients that leave while a run streams leave nothing behind on the Redis server.

A reader (a chat page's websocket, an API client's event stream) holds a channel of the
channel layer, subscribed on Redis, in the conversation's group. However it leaves (a
clean close, a dropped connection, a close right after connecting) and whatever arrives
meanwhile (the run's live frames), its subscription must end with it: 50 of each kind,
then the Redis server's subscriptions are counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
import struct
from base64 import b64encode
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from tests.integration.observers import EventStream
from tests.integration.stack import Browser, Stack, async_wait_for, running_stack

pytestmark = pytest.mark.integration

CLIENTS = 20  # of each kind: enough to race a disconnect with a live frame every time


def subscriptions(stack: Stack) -> list[str]:
    """The channels subscribed on the stack's Redis server, by every client together."""
    with contextlib.closing(redis.Redis.from_url(stack.redis_url)) as client:
        return sorted(name.decode() for name in client.pubsub_channels())


async def raw_connection(browser: Browser, request: bytes) -> tuple[asyncio.StreamReader, Any]:
    host, port = urlsplit(browser.base_url).hostname, urlsplit(browser.base_url).port
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(request)
    await writer.drain()
    return reader, writer


def drop(writer: asyncio.StreamWriter) -> None:
    """End the TCP connection with a reset: no close frame, no orderly shutdown."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def cookie_header(browser: Browser) -> str:
    return "; ".join(f"{k}={v}" for k, v in browser.http.cookies.items())


def upgrade_request(browser: Browser, conversation_id: int) -> bytes:
    key = b64encode(secrets.token_bytes(16)).decode()
    netloc = urlsplit(browser.base_url).netloc
    return (
        f"GET /ws/conversations/{conversation_id}/ HTTP/1.1\r\nHost: {netloc}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: {browser.base_url}\r\n"
        f"Cookie: {cookie_header(browser)}\r\n\r\n"
    ).encode()


async def socket_closed_cleanly(browser: Browser, conversation_id: int) -> None:
    """Catch up, take a live frame, close with a close frame."""
    async with browser.socket(conversation_id) as ws:
        await asyncio.wait_for(ws.recv(), timeout=20)
        await asyncio.wait_for(ws.recv(), timeout=20)


async def socket_dropped(browser: Browser, conversation_id: int) -> None:
    """Upgrade, read a frame or two, then drop the connection (a phone going offline)."""
    reader, writer = await raw_connection(browser, upgrade_request(browser, conversation_id))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=20)
    assert head.startswith(b"HTTP/1.1 101"), head
    await asyncio.wait_for(reader.read(4096), timeout=20)
    drop(writer)


async def socket_closed_at_once(browser: Browser, conversation_id: int) -> None:
    """Close right after connecting: the catch-up and live frames still on their way."""
    async with browser.socket(conversation_id):
        pass


async def stream_closed_early(browser: Browser, conversation_id: int) -> None:
    """An API client reads the first event of the stream, then hangs up."""
    path = f"/api/conversations/{conversation_id}/events?follow=1"
    async with browser.http.stream("GET", path, timeout=20) as response:
        assert response.status_code == 200
        async for _line in response.aiter_lines():
            break


async def stream_dropped_at_once(browser: Browser, conversation_id: int) -> None:
    """The request goes out and the connection is reset before the answer comes."""
    netloc = urlsplit(browser.base_url).netloc
    request = (
        f"GET /api/conversations/{conversation_id}/events?follow=1 HTTP/1.1\r\n"
        f"Host: {netloc}\r\nCookie: {cookie_header(browser)}\r\n\r\n"
    ).encode()
    _reader, writer = await raw_connection(browser, request)
    drop(writer)


LEAVING = [
    socket_closed_cleanly,
    socket_dropped,
    socket_closed_at_once,
    stream_closed_early,
    stream_dropped_at_once,
]


async def test_readers_leaving_while_a_run_streams_leave_no_subscription(tmp_path) -> None:
    marker = f"LEAVE-{secrets.token_hex(3)}"
    words = [f"word{i} " for i in range(4000)]
    rule = {
        "contains": marker,
        "in": "any",
        "responses": [{"chunks": words, "chunk_delay": 0.01}],
    }
    with running_stack(mode="team", private_redis=True) as stack:
        stack.script(rules=[rule])
        async with Browser(stack.base_url) as browser:
            await browser.login()
            conversation_id = await browser.new_conversation()
            async with EventStream(browser, conversation_id) as watcher:
                await browser.send(conversation_id, f"{marker}: talk for a while")
                await async_wait_for(
                    lambda: watcher.answer().count("word") >= 20,
                    timeout=30,
                    what="the answer streaming",
                    detail=stack.logs,
                )
                baseline = subscriptions(stack)  # servers, the worker and the watcher
                for leave in LEAVING:
                    await asyncio.gather(*(leave(browser, conversation_id) for _ in range(CLIENTS)))
                still_streaming = not watcher.ended()
                left = await async_wait_for(
                    lambda: (now := subscriptions(stack)) == baseline and now,
                    timeout=15,
                    what="every subscription of the readers that left to end",
                    detail=lambda: f"{baseline=}\nnow={subscriptions(stack)}\n{stack.logs()}",
                )

    assert still_streaming, "the readers must leave while frames flow"
    assert left == baseline
