"""httpcore connections on plain asyncio, for the LLM clients' hot read loop.

httpcore reaches asyncio through anyio: every socket read of a streamed answer detects
the async library (sniffio), enters and exits a cancel scope for its timeout, and
re-registers the socket with the selector after anyio paused reading. Profiled in a
worker streaming 200 answers, that was 12-15% of its CPU, more than parsing the tokens.
This backend implements httpcore's documented network-backend interface with an
``asyncio.Protocol``: data received is buffered, a read returns at once when bytes are
waiting, and a timeout is one timer handle. Timeouts and errors map to httpcore's own
exceptions, so httpx and the client above behave exactly as with the default backend.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any

import httpcore
import httpx

from engine.llm.pool import LinearConnectionPool

# Reading pauses while this much is buffered and unread, and resumes below the low mark.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _StreamProtocol(asyncio.Protocol):
    """Buffers what arrives and wakes the one reader (or writer) waiting for it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.read_waiter: asyncio.Future[None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and not self.reading_paused and self.transport:
            self.transport.pause_reading()
            self.reading_paused = True
        _wake(self.read_waiter)

    def eof_received(self) -> bool:
        self.eof = True
        _wake(self.read_waiter)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        _wake(self.read_waiter)
        _wake(self.drain_waiter)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        _wake(self.drain_waiter)


def _wake(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


async def _wait(waiter: asyncio.Future[None], timeout: float | None) -> None:
    """Await ``waiter``; TimeoutError after ``timeout`` seconds (None: no limit)."""
    if timeout is None:
        await waiter
        return
    timer = asyncio.get_running_loop().call_later(timeout, _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _StreamProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.buffer and not protocol.eof:
            await self._until_woken("read_waiter", timeout, httpcore.ReadTimeout)
        if protocol.buffer:
            data = bytes(protocol.buffer[:max_bytes])
            del protocol.buffer[:max_bytes]
            if protocol.reading_paused and len(protocol.buffer) < LOW_WATER:
                protocol.reading_paused = False
                self._transport.resume_reading()
            return data
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""  # the server closed the connection

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        if protocol.writing_paused:
            await self._until_woken("drain_waiter", timeout, httpcore.WriteTimeout)
            if protocol.error is not None:
                raise httpcore.WriteError(str(protocol.error))

    async def _until_woken(
        self, waiter_name: str, timeout: float | None, timeout_error: type[Exception]
    ) -> None:
        """Park a future as the protocol's ``waiter_name`` until it wakes it (or timeout)."""
        waiter = asyncio.get_running_loop().create_future()
        setattr(self._protocol, waiter_name, waiter)
        try:
            await _wait(waiter, timeout)
        except TimeoutError:
            raise timeout_error(f"timed out after {timeout} s") from None
        finally:
            setattr(self._protocol, waiter_name, None)

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                )
        except TimeoutError:
            self._transport.close()
            raise httpcore.ConnectTimeout("timed out in the TLS handshake") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.close()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:  # the connection went away during the handshake
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport  # type: ignore[assignment]
        return AsyncioStream(transport, self._protocol)  # type: ignore[arg-type]

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        if info == "is_readable":  # an idle connection with data or EOF: the server hung up
            return self._protocol.eof or bool(self._protocol.buffer)
        return None


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        local = (local_address, 0) if local_address else None
        opening = asyncio.get_running_loop().create_connection(
            _StreamProtocol, host, port, local_addr=local
        )
        return await _connected(opening, f"{host}:{port}", timeout, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        opening = asyncio.get_running_loop().create_unix_connection(_StreamProtocol, path)
        return await _connected(opening, path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def _connected(
    opening: Awaitable[tuple[asyncio.Transport, _StreamProtocol]],
    where: str,
    timeout: float | None,
    options: Iterable[SocketOption] | None,
) -> AsyncioStream:
    """The stream of a connection being opened, with httpcore's errors and socket options."""
    try:
        async with asyncio.timeout(timeout):
            transport, protocol = await opening
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"timed out connecting to {where}") from None
    except OSError as exc:
        raise httpcore.ConnectError(str(exc)) from exc
    sock: socket.socket | None = transport.get_extra_info("socket")
    for option in options or ():
        if sock is not None:
            sock.setsockopt(*option)  # type: ignore[arg-type]
    return AsyncioStream(transport, protocol)


class AsyncioHTTPTransport(httpx.AsyncHTTPTransport):
    """httpx's HTTP/1.1 transport whose connection pool uses :class:`AsyncioBackend` (and
    assigns connections in linear time, :mod:`engine.llm.pool`)."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        super().__init__(verify=ssl_context, limits=limits)
        # The pool httpx built is replaced before it opened anything; httpx has no
        # argument for the network backend, httpcore's pool does.
        self._pool = LinearConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )
