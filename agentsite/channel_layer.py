"""Channel layers: embedded mode's in-memory layer, team mode's batched Redis pub/sub layer.

Embedded: channels' in-memory layer without its per-message costs.

``channels.layers.InMemoryChannelLayer`` deep-copies every message, scans every channel
and group for expired entries on every send and receive, and spawns a task per group
member. A streamed answer sends about 20 frames a second per run, so with many open
chats each frame paid for every socket of the process. This layer keeps the same
semantics (capacity, expiry, group expiry, ``ChannelFull``) but copies a message's top
level only (receivers never share one dict), sweeps expired entries at most once a
``SWEEP_INTERVAL``, and puts a group message straight into each member's queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import redis
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer, RedisSingleShardConnection

from agentsite.redis_batch import batcher
from agentsite.resp import RECONNECT_DELAY, Subscription, plain_options

SWEEP_INTERVAL = 1.0
SUBSCRIBER_OPTIONS = {"socket_timeout": None, "protocol": 2}

logger = logging.getLogger(__name__)


class LocalChannelLayer(InMemoryChannelLayer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next_sweep = 0.0

    def _clean_expired(self) -> None:
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + SWEEP_INTERVAL
        super()._clean_expired()

    async def send(self, channel: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        assert "__asgi_channel__" not in message
        self.require_valid_channel_name(channel)
        self._put(channel, message)

    def _put(self, channel: str, message: dict[str, Any]) -> None:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((time.time() + self.expiry, dict(message)))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired()
        for channel in list(self.groups.get(group, ())):
            with contextlib.suppress(ChannelFull):  # as channels: a full member misses it
                self._put(channel, message)


class WaitingShard(RedisSingleShardConnection):
    """One Redis host's subscriptions, received by waiting on the connection.

    channels_redis asks redis-py for a message with a 0.1 s timeout in a loop: every
    server process wakes ten times a second while idle (0.34 ms of CPU per wake-up on
    the 2-core test machine), and each message passes redis-py's retry and metrics
    layers. Here the receiver reads the subscription connection until Redis sends
    something: a published message goes straight into its channels' queues, any other
    reply (subscribe confirmations) to redis-py's own bookkeeping. The connection speaks
    RESP2 without a read timeout (``SUBSCRIBER_OPTIONS``, unless the host's options say
    otherwise): on redis-py 8's defaults, RESP3 and a 5 s socket timeout, every message
    also armed a timer and passed the push-notification handler, which formats it for a
    debug log. A dropped connection is reconnected, and redis-py subscribes it again.
    """

    def __init__(self, host: dict[str, Any], channel_layer: Any) -> None:
        host = {**SUBSCRIBER_OPTIONS, **host}
        super().__init__(host, channel_layer)
        self._has_subscriptions = asyncio.Event()

    async def subscribe(self, channel: str) -> None:
        await super().subscribe(channel)
        self._has_subscriptions.set()

    async def _do_receiving(self) -> None:
        while True:
            pubsub = self._pubsub
            if pubsub is None or not pubsub.subscribed:
                self._has_subscriptions.clear()
                await self._has_subscriptions.wait()
                continue
            try:
                await self._receive_while_subscribed(pubsub)
            except (redis.ConnectionError, OSError) as error:
                logger.warning("Redis subscription connection lost (%s); reconnecting", error)
                with contextlib.suppress(Exception):
                    await pubsub.connection.disconnect()
                await asyncio.sleep(RECONNECT_DELAY)
            except Exception:  # as channels_redis: keep receiving
                logger.exception("Unexpected exception in receive task")
                await asyncio.sleep(RECONNECT_DELAY)

    async def _receive_while_subscribed(self, pubsub: Any) -> None:
        connection = pubsub.connection
        if not connection.is_connected:
            await connection.connect()  # redis-py's connect callback re-subscribes
        while pubsub.subscribed:
            try:
                reply = await connection.read_response(disconnect_on_error=False, push_request=True)
            except redis.TimeoutError:  # only with a socket_timeout in the host's options
                continue
            if isinstance(reply, list) and len(reply) == 3 and reply[0] == b"message":
                self._receive_message({"channel": reply[1], "data": reply[2]})
            else:
                self._receive_message(
                    await pubsub.handle_message(reply, ignore_subscribe_messages=True)
                )


class RespShard(RedisSingleShardConnection):
    """One Redis host's subscriptions on a hiredis connection (:class:`Subscription`).

    For hosts given as a plain URL (:func:`~agentsite.resp.plain_options`): each published
    message goes from the bytes read straight into its channels' queues, without
    redis-py's reader (42-53 µs of CPU a message through :class:`WaitingShard`). Publishing
    (sharded layers only; a single host publishes through the batcher) stays
    channels_redis's.
    """

    def __init__(self, host: dict[str, Any], channel_layer: Any, options: dict[str, Any]) -> None:
        super().__init__(host, channel_layer)
        self._subscription = Subscription(options, self._deliver)

    @classmethod
    def serves(cls, host: dict[str, Any]) -> dict[str, Any] | None:
        """The connection options when ``host`` is a plain URL this shard can serve."""
        if set(host) != {"address"} or not isinstance(host["address"], str):
            return None
        return plain_options(host["address"])

    async def subscribe(self, channel: str) -> None:
        async with self._lock:
            if channel not in self._subscribed_to:
                await self._subscription.subscribe(channel)
                self._subscribed_to.add(channel)

    async def unsubscribe(self, channel: str) -> None:
        async with self._lock:
            if channel in self._subscribed_to:
                await self._subscription.unsubscribe(channel)
                self._subscribed_to.remove(channel)

    async def flush(self) -> None:
        await self._subscription.close()
        await super().flush()

    def _deliver(self, channel: bytes, data: bytes) -> None:
        self._receive_message({"channel": channel, "data": data})


def _receiving_shard(shard: RedisSingleShardConnection, layer: Any) -> RedisSingleShardConnection:
    options = RespShard.serves(shard.host)
    if options is not None:
        return RespShard(shard.host, layer, options)
    return WaitingShard(shard.host, layer)


class RedisPubSubLayer(RedisPubSubChannelLayer):
    """channels_redis's pub/sub layer whose group sends share pipelines (team mode).

    channels_redis sends each ``group_send`` as one ``PUBLISH`` round trip behind a lock
    that every publish of the process waits for. Here the ``PUBLISH`` (the same channel
    name and message format, so any channels_redis receiver reads it) goes through the
    loop's :func:`~agentsite.redis_batch.batcher`, and :meth:`publish_command` lets a
    caller send it in one pipeline with its own commands. Sharded layers (several hosts)
    keep channels_redis's own path. Subscriptions are received by :class:`RespShard`, or
    :class:`WaitingShard` for hosts given with connection options.
    """

    def __init__(self, hosts: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(hosts=hosts, **kwargs)
        single_url = hosts is not None and len(hosts) == 1 and isinstance(hosts[0], str)
        self.publish_url: str | None = hosts[0] if single_url else None

    def _get_layer(self) -> Any:
        """The running loop's layer, receiving through our shards' connections."""
        layer = super()._get_layer()
        if not isinstance(layer._shards[0], (RespShard, WaitingShard)):  # new: nothing started
            layer._shards = [_receiving_shard(shard, layer) for shard in layer._shards]
        return layer

    def publish_command(self, group: str, message: dict[str, Any]) -> tuple[Any, ...]:
        """The ``PUBLISH`` that delivers ``message`` to ``group``'s members."""
        assert self.publish_url is not None, "a sharded layer publishes through its shards"
        channel = self._get_layer()._get_group_channel_name(group)
        return ("PUBLISH", channel, self.serialize(message))

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if self.publish_url is None:
            await self._get_layer().group_send(group, message)
            return
        await batcher(self.publish_url).execute(self.publish_command(group, message))
