"""The asyncio network backend under httpx: TLS, server hang-ups, timeouts, flow control."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import httpx
import pytest

from engine.llm.netbackend import AsyncioHTTPTransport
from tests.tlscert import self_signed_certificate

LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=8)


def self_signed(tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context trusting it) for 127.0.0.1."""
    cert_pem, key_pem = self_signed_certificate("127.0.0.1")
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert_pem)
    key_file.write_bytes(key_pem)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


@contextlib.asynccontextmanager
async def serving(handler, ssl_context=None) -> AsyncIterator[int]:
    """A raw HTTP/1.1 server on a free port: ``await handler(body, writer)`` answers a
    request and returns whether to keep the connection open. Stops every connection."""
    tasks: set[asyncio.Task] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks.add(asyncio.current_task())
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length) if length else b""
                if not await handler(body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=ssl_context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


def reply(body: bytes, *, close: bool = False) -> bytes:
    head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n"
    return (head + ("connection: close\r\n" if close else "") + "\r\n").encode() + body


async def client_for(ssl_context: ssl.SSLContext | None = None) -> httpx.AsyncClient:
    context = ssl_context or ssl.create_default_context()
    return httpx.AsyncClient(transport=AsyncioHTTPTransport(ssl_context=context, limits=LIMITS))


async def test_https_request_and_keep_alive_reuse(tmp_path):
    server_ctx, client_ctx = self_signed(tmp_path)
    peers: list[object] = []

    async def handler(body, writer):
        peers.append(writer.get_extra_info("peername"))
        writer.write(reply(b"secure " + body))
        await writer.drain()
        return True

    async with serving(handler, server_ctx) as port, await client_for(client_ctx) as client:
        first = await client.post(f"https://127.0.0.1:{port}/", content=b"one")
        second = await client.post(f"https://127.0.0.1:{port}/", content=b"two")

    assert (first.text, second.text) == ("secure one", "secure two")
    assert peers[0] == peers[1]  # one TLS connection, reused


async def test_untrusted_certificate_is_a_connect_error(tmp_path):
    server_ctx, _trusting = self_signed(tmp_path)

    async def never(body, writer):
        raise AssertionError("no request gets through an untrusted handshake")

    async with serving(never, server_ctx) as port, await client_for() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"https://127.0.0.1:{port}/")


async def test_a_connection_the_server_closed_while_idle_is_replaced():
    served = 0

    async def handler(body, writer):
        nonlocal served
        served += 1
        writer.write(reply(b"ok"))
        await writer.drain()
        return False  # hang up after answering, without saying "connection: close"

    async with serving(handler) as port, await client_for() as client:
        await client.get(f"http://127.0.0.1:{port}/")
        await asyncio.sleep(0.05)  # the FIN arrives while the connection sits in the pool
        again = await client.get(f"http://127.0.0.1:{port}/")

    assert again.text == "ok" and served == 2


async def test_read_timeout_and_refused_connection_map_to_httpx_errors():
    async def silent(body, writer):
        await asyncio.sleep(5)
        return False

    async with serving(silent) as port, await client_for() as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"http://127.0.0.1:{port}/", timeout=0.2)
    async with await client_for() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")  # the server is gone


async def test_a_large_streamed_body_arrives_whole_through_flow_control():
    chunk = bytes(range(256)) * 4096  # 1 MiB, past the backend's high-water mark

    async def handler(body, writer):
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % (4 * len(chunk)))
        for _ in range(4):
            writer.write(chunk)
            await writer.drain()
        return True

    url = "http://127.0.0.1:{}/"
    async with serving(handler) as port, await client_for() as client:
        received = bytearray()
        async with client.stream("GET", url.format(port)) as response:
            async for part in response.aiter_raw():
                received += part
                await asyncio.sleep(0)  # a slow reader

    assert bytes(received) == chunk * 4
