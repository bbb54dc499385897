"""The LLM clients' transport (httpcore's pool on plain asyncio) against real loopback
servers: what httpx's default transport does, it does too."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest

from engine.llm.transport import HIGH_WATER, AsyncioTransport
from tests.tlscert import self_signed_certificate

LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=8)


class HTTPServer:
    """A loopback HTTP/1.1 server answering each request with ``body`` (keep-alive), or
    never (``silent``); it counts connections and can hang up idle ones."""

    def __init__(self, body: bytes = b"hello", *, silent: bool = False) -> None:
        self.body = body
        self.silent = silent
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.stopping = asyncio.Event()

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_context)
        return self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                if self.silent:
                    await self.stopping.wait()
                    break
                head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(self.body)}\r\n\r\n"
                writer.write(head.encode() + self.body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def hang_up(self) -> None:
        for writer in self.writers:
            writer.close()
        await asyncio.sleep(0.05)  # the FIN reaches the client's protocol

    async def stop(self) -> None:
        self.stopping.set()
        self.server.close()
        await self.hang_up()


@pytest.fixture
async def client():
    transport = AsyncioTransport(ssl_context=ssl.create_default_context(), limits=LIMITS)
    async with httpx.AsyncClient(transport=transport) as client:
        yield client


async def test_a_connection_is_reused_between_requests(client):
    server = HTTPServer()
    port = await server.start()
    try:
        for _ in range(3):
            response = await client.get(f"http://127.0.0.1:{port}/")
            assert response.text == "hello"
        assert server.connections == 1
    finally:
        await server.stop()


async def test_a_connection_the_server_closed_while_idle_is_replaced(client):
    server = HTTPServer()
    port = await server.start()
    try:
        assert (await client.get(f"http://127.0.0.1:{port}/")).text == "hello"
        await server.hang_up()
        assert (await client.get(f"http://127.0.0.1:{port}/")).text == "hello"
        assert server.connections == 2
    finally:
        await server.stop()


async def test_a_body_larger_than_the_read_buffer_arrives_whole(client):
    body = bytes(range(256)) * (4 * HIGH_WATER // 256)
    server = HTTPServer(body)
    port = await server.start()
    try:
        async with client.stream("GET", f"http://127.0.0.1:{port}/") as response:
            received = bytearray()
            async for chunk in response.aiter_raw():
                received += chunk
                await asyncio.sleep(0)  # a slow reader: the socket's reading pauses
        assert bytes(received) == body
    finally:
        await server.stop()


async def test_https_verifies_the_servers_certificate(tmp_path):
    cert_pem, key_pem = self_signed_certificate("127.0.0.1")
    (tmp_path / "cert.pem").write_bytes(cert_pem)
    (tmp_path / "key.pem").write_bytes(key_pem)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    server = HTTPServer()
    port = await server.start(server_context)
    trusting = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
    try:
        transport = AsyncioTransport(ssl_context=trusting, limits=LIMITS)
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(f"https://127.0.0.1:{port}/")).text == "hello"
        transport = AsyncioTransport(ssl_context=ssl.create_default_context(), limits=LIMITS)
        async with httpx.AsyncClient(transport=transport) as client:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await client.get(f"https://127.0.0.1:{port}/")
    finally:
        await server.stop()


async def test_a_silent_server_raises_httpx_read_timeout(client):
    server = HTTPServer(silent=True)
    port = await server.start()
    try:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"http://127.0.0.1:{port}/", timeout=0.2)
    finally:
        await server.stop()


async def test_a_refused_connection_raises_httpx_connect_error(client):
    server = HTTPServer()
    port = await server.start()
    await server.stop()
    with pytest.raises(httpx.ConnectError):
        await client.get(f"http://127.0.0.1:{port}/")
