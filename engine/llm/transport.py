"""The LLM clients' HTTP transport: httpcore's connection pool on a plain-asyncio network
backend, behind httpx's transport interface.

httpx reaches asyncio through anyio: each write and read of a streamed answer enters a
cancel scope, and each pool assignment asks every idle connection whether its socket is
readable, which anyio answers by building its table of socket attributes. Profiled on a
server running 20 runs at once, that was 40% of the HTTP client's time. Both ends are
documented extension points: httpcore's pool takes a ``network_backend``
(:class:`httpcore.AsyncNetworkBackend`, :class:`httpcore.AsyncNetworkStream`), and httpx
takes any :class:`httpx.AsyncBaseTransport`. Errors are httpcore's own, mapped onto
httpx's exceptions, so the client above behaves as with httpx's default transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator
from typing import Any

import httpcore
import httpx

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
        return False  # the transport closes itself

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


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One connection: reads return at once while bytes are buffered; a timeout is one
    timer handle, not a cancel scope."""

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
        if self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        if self._protocol.writing_paused:
            await self._until_woken("drain_waiter", timeout, httpcore.WriteTimeout)
            if self._protocol.error is not None:
                raise httpcore.WriteError(str(self._protocol.error))

    async def _until_woken(
        self, waiter_name: str, timeout: float | None, timeout_error: type[Exception]
    ) -> None:
        """Park a future as the protocol's ``waiter_name`` until it wakes it (or timeout)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        setattr(self._protocol, waiter_name, waiter)
        timer = loop.call_later(timeout, _expire, waiter) if timeout is not None else None
        try:
            await waiter
        except TimeoutError:
            raise timeout_error(f"timed out after {timeout} s") from None
        finally:
            setattr(self._protocol, waiter_name, None)
            if timer is not None:
                timer.cancel()

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
                    self._transport, self._protocol, ssl_context, server_hostname=server_hostname
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
        """httpcore's documented keys; ``is_readable`` on an idle connection means the
        server sent something or hung up: the pool drops it instead of reusing it."""
        if info == "is_readable":
            return self._protocol.eof or bool(self._protocol.buffer)
        key = {
            "ssl_object": "ssl_object",
            "client_addr": "sockname",
            "server_addr": "peername",
            "socket": "socket",
        }.get(info)
        return self._transport.get_extra_info(key) if key else None


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


# httpcore's exceptions and httpx's of the same meaning, most specific first.
_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for core_error, httpx_error in _ERRORS:
            if isinstance(exc, core_error):
                raise httpx_error(str(exc)) from exc
        raise


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        with _httpx_errors():
            await self._stream.aclose()


class AsyncioTransport(httpx.AsyncBaseTransport):
    """An HTTP/1.1 connection pool (httpcore's) on :class:`AsyncioBackend`."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
