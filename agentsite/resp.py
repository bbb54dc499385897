"""Redis commands written packed together on one connection, replies parsed by hiredis.

Why: team mode's publishing hot path (every streamed frame's tail append and ``PUBLISH``,
see :mod:`agentsite.redis_batch`) spent most of its Redis CPU in redis-py's pipeline
machinery (a command object, option filtering and a response callback per command, the
retry wrapper per pipeline): here 150-200 µs of CPU for one frame's pipeline and 34-43 µs
per frame in pipelines of 30 frames, against 40-50 and 3-4 µs with hiredis (the C library
redis-py itself parses with) packing the commands and parsing the replies on a plain
asyncio connection. Replies are Redis's own (``EXPIRE`` answers 1, not True).

:class:`Subscription` does the same for the receiving side: a connection subscribed to a
set of channels hands each published message to a callback straight from the bytes read
(redis-py's pub/sub reader cost 42-53 µs of CPU a message here).

Only what the hot paths need is handled here: TCP or Unix-socket URLs with optional
credentials and database (:func:`plain_options`). Any other URL (TLS, socket options) gets
redis-py (:class:`RedisPyPipeline`; channels_redis's own receiver).
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import hiredis
import redis
import redis.asyncio
from redis.connection import UnixDomainSocketConnection, parse_url

Command = tuple[Any, ...]
OnMessage = Callable[[bytes, bytes], None]  # (channel, data) of a published message
CONNECT_TIMEOUT = 10.0
RECONNECT_DELAY = 1.0  # seconds between attempts while Redis cannot be reached
_PLAIN_OPTIONS = {"host", "port", "db", "username", "password", "path", "connection_class"}

logger = logging.getLogger(__name__)


class Pipelined(Protocol):
    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        """Replies to ``commands`` in order; an error reply is returned as a
        ``redis.ResponseError``, a failed connection raises ``redis.ConnectionError``."""
        ...

    async def close(self) -> None: ...


def plain_options(url: str) -> dict[str, Any] | None:
    """``url``'s connection options if :class:`RespConnection` can serve it, else None."""
    options = parse_url(url)
    plain = options.get("connection_class") in (None, UnixDomainSocketConnection)
    return options if plain and set(options) <= _PLAIN_OPTIONS else None


def pipelined(url: str) -> Pipelined:
    """The cheapest connection that serves ``url``."""
    options = plain_options(url)
    if options is not None:
        return RespConnection(options)
    return RedisPyPipeline(redis.asyncio.Redis.from_url(url))


class _ReplyReader(asyncio.Protocol):
    """Hands each request the replies to its commands, in the order Redis sends them.

    On a subscribed connection, what arrives while no request waits goes to ``on_push``:
    published messages to the callback, subscription confirmations nowhere.
    """

    def __init__(
        self, on_push: OnMessage | None = None, on_lost: Callable[[], None] | None = None
    ) -> None:
        self._reader = hiredis.Reader(replyError=redis.ResponseError)
        self._waiting: deque[tuple[asyncio.Future[list[Any]], int, list[Any]]] = deque()
        self._transport: asyncio.Transport | None = None
        self._on_push = on_push
        self._on_lost = on_lost
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def request(self, commands: Sequence[Command]) -> asyncio.Future[list[Any]]:
        self.send(commands)  # no reply can arrive before the waiter is queued: same loop turn
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((future, len(commands), []))
        return future

    def send(self, commands: Sequence[Command]) -> None:
        """Write ``commands`` without waiting for replies (subscriptions)."""
        if self.lost or self._transport is None:
            raise redis.ConnectionError("the Redis connection is closed")
        self._transport.write(b"".join([hiredis.pack_command(command) for command in commands]))

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        try:
            while (reply := self._reader.gets()) is not False:
                if not self._waiting:
                    self._push(reply)
                    continue
                future, expected, replies = self._waiting[0]
                replies.append(reply)
                if len(replies) == expected:
                    self._waiting.popleft()
                    if not future.done():  # else its caller was cancelled: replies dropped
                        future.set_result(replies)
        except hiredis.ProtocolError as error:
            self._fail(redis.ConnectionError(f"Redis sent something unreadable: {error}"))
            if self._transport is not None:
                self._transport.abort()

    def _push(self, reply: Any) -> None:
        if self._on_push is None:
            return
        if type(reply) is list and len(reply) == 3 and reply[0] == b"message":
            try:
                self._on_push(reply[1], reply[2])
            except Exception:  # one bad message must not drop the connection
                logger.exception("handling a message from Redis failed")
        elif isinstance(reply, redis.ResponseError):
            logger.warning("Redis refused a subscription command: %s", reply)

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else ""
        self._fail(redis.ConnectionError(f"lost the connection to Redis{reason}"))
        if self._on_lost is not None:
            self._on_lost()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()

    def _fail(self, error: Exception) -> None:
        self.lost = True
        while self._waiting:
            future, _expected, _replies = self._waiting.popleft()
            if not future.done():
                future.set_exception(error)


class RespConnection:
    """One lazily opened connection; a lost one is replaced at the next request."""

    def __init__(
        self,
        options: dict[str, Any],
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        on_push: OnMessage | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._options = options
        self._connect_timeout = connect_timeout
        self._on_push, self._on_lost = on_push, on_lost
        self._reader: _ReplyReader | None = None
        self._connecting: asyncio.Lock | None = None

    @property
    def connected(self) -> bool:
        return self._reader is not None and not self._reader.lost

    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        return await (await self._ready()).request(commands)

    async def send(self, commands: Sequence[Command]) -> None:
        """Write ``commands`` (connecting first if needed) without waiting for replies."""
        (await self._ready()).send(commands)

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    async def _ready(self) -> _ReplyReader:
        """The open connection; a new one if there is none or it was lost."""
        reader = self._reader
        return reader if reader is not None and not reader.lost else await self._connect()

    async def _connect(self) -> _ReplyReader:
        self._connecting = self._connecting or asyncio.Lock()
        async with self._connecting:
            if self._reader is not None and self.connected:
                return self._reader  # another caller connected meanwhile
            self._reader = None
            reader = await self._open()
            try:
                await self._set_up(reader)
            except BaseException:
                reader.close()
                raise
            self._reader = reader
            return reader

    async def _open(self) -> _ReplyReader:
        loop, path = asyncio.get_running_loop(), self._options.get("path")
        host, port = self._options.get("host", "localhost"), self._options.get("port", 6379)
        try:
            async with asyncio.timeout(self._connect_timeout):
                if path:
                    _transport, reader = await loop.create_unix_connection(self._protocol, path)
                else:
                    _transport, reader = await loop.create_connection(self._protocol, host, port)
        except (OSError, TimeoutError) as error:
            where = path or f"{host}:{port}"
            message = f"could not connect to Redis at {where}: {error}"
            raise redis.ConnectionError(message) from error
        return reader

    def _protocol(self) -> _ReplyReader:
        return _ReplyReader(self._on_push, self._on_lost)

    async def _set_up(self, reader: _ReplyReader) -> None:
        """Authenticate and select the database, as the URL says."""
        setup: list[Command] = []
        password, username = self._options.get("password"), self._options.get("username")
        if password is not None:
            setup.append(("AUTH", username, password) if username else ("AUTH", password))
        if self._options.get("db"):
            setup.append(("SELECT", self._options["db"]))
        if not setup:
            return
        for reply in await reader.request(setup):
            if isinstance(reply, redis.ResponseError):
                raise reply


class Subscription:
    """A connection subscribed to a set of channels, resubscribed after a reconnect.

    ``on_message(channel, data)`` runs on the loop for every message published to one of
    them. Subscribing only writes the command (as redis-py does): Redis applies it before
    anything it reads later, so a publish that follows a subscribe reaches it.
    """

    def __init__(
        self,
        options: dict[str, Any],
        on_message: OnMessage,
        *,
        reconnect_delay: float = RECONNECT_DELAY,
    ) -> None:
        self._connection = RespConnection(options, on_push=on_message, on_lost=self._lost)
        self._channels: set[str] = set()
        self._reconnect_delay = reconnect_delay
        self._reconnecting: asyncio.Task[None] | None = None

    async def subscribe(self, channel: str) -> None:
        self._channels.add(channel)
        await self._connection.send([("SUBSCRIBE", channel)])

    async def unsubscribe(self, channel: str) -> None:
        self._channels.discard(channel)
        if self._connection.connected:
            await self._connection.send([("UNSUBSCRIBE", channel)])

    async def close(self) -> None:
        """Unsubscribe from everything and disconnect (a later subscribe reconnects)."""
        self._channels.clear()
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            self._reconnecting = None
        await self._connection.close()

    def _lost(self) -> None:
        if self._channels and (self._reconnecting is None or self._reconnecting.done()):
            self._reconnecting = asyncio.ensure_future(self._resubscribe())

    async def _resubscribe(self) -> None:
        """Subscribe a new connection to every channel (one a subscribe opened meanwhile
        may carry only its own)."""
        logger.warning("Redis subscription connection lost; reconnecting")
        while self._channels:
            await asyncio.sleep(self._reconnect_delay)
            try:
                await self._connection.send([("SUBSCRIBE", *sorted(self._channels))])
                return
            except redis.RedisError as error:
                logger.warning("could not resubscribe to Redis (%s); trying again", error)


class RedisPyPipeline:
    """The same interface over redis-py's pipeline, for URLs :class:`RespConnection` skips."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self._client = client

    async def execute(self, commands: Sequence[Command]) -> list[Any]:
        pipeline = self._client.pipeline(transaction=False)
        for command in commands:
            pipeline.execute_command(*command)
        return await pipeline.execute(raise_on_error=False)

    async def close(self) -> None:
        await self._client.aclose()
