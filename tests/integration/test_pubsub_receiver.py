"""Team mode's receiving side: subscriptions read by waiting on Redis, not by polling."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis
from channels_redis.pubsub import RedisPubSubChannelLayer

from agentsite.channel_layer import RedisPubSubLayer, RespShard, WaitingShard
from tests.integration.stack import async_wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 5.0


# A host given as a URL is received on a hiredis connection; one given with connection
# options through redis-py's connection: both must behave the same.
SHARDS = {"url": RespShard, "options": WaitingShard}


def host(redis_url: str, form: str) -> Any:
    return redis_url if form == "url" else {"address": redis_url, "socket_keepalive": True}


@pytest.fixture(params=sorted(SHARDS))
async def layers(
    request, redis_url
) -> AsyncIterator[tuple[RedisPubSubLayer, RedisPubSubChannelLayer]]:
    """Our receiving layer and a stock channels_redis sender on the same Redis."""
    reader = RedisPubSubLayer(hosts=[host(redis_url, request.param)])
    reader.shard_form = request.param  # type: ignore[attr-defined]
    sender = RedisPubSubChannelLayer(hosts=[redis_url])
    try:
        yield reader, sender
    finally:
        await reader.flush()
        await sender.flush()


def group_name() -> str:
    return f"conversation.{secrets.randbelow(10**12)}"


async def receive(layer: RedisPubSubLayer, channel: str) -> dict:
    return await asyncio.wait_for(layer.receive(channel), TIMEOUT)


async def test_the_layer_receives_through_our_shards(layers):
    reader, _sender = layers
    channel = await reader.new_channel()
    await reader.group_add(group_name(), channel)

    expected = SHARDS[reader.shard_form]
    assert all(type(shard) is expected for shard in reader._get_layer()._shards)


async def test_group_messages_from_a_stock_sender_arrive_complete_and_in_order(layers):
    reader, sender = layers
    group, channel = group_name(), await reader.new_channel()
    await reader.group_add(group, channel)

    for seq in range(300):
        await sender.group_send(group, {"type": "run.event", "seq": seq, "html": "<p>w</p>"})

    received = [await receive(reader, channel) for _ in range(300)]
    assert [m["seq"] for m in received] == list(range(300))
    assert received[0] == {"type": "run.event", "seq": 0, "html": "<p>w</p>"}


async def test_a_group_joined_while_the_receiver_waits_gets_its_messages(layers):
    reader, sender = layers
    first, second = group_name(), group_name()
    channel = await reader.new_channel()
    await reader.group_add(first, channel)
    await sender.group_send(first, {"type": "x", "n": 1})
    assert (await receive(reader, channel))["n"] == 1  # the receiver is now waiting on Redis

    await reader.group_add(second, channel)
    await sender.group_send(second, {"type": "x", "n": 2})

    assert (await receive(reader, channel))["n"] == 2


async def test_a_left_group_delivers_nothing_while_the_others_still_do(layers):
    reader, sender = layers
    left, kept = group_name(), group_name()
    channel = await reader.new_channel()
    await reader.group_add(left, channel)
    await reader.group_add(kept, channel)

    await reader.group_discard(left, channel)
    await sender.group_send(left, {"type": "x", "group": "left"})
    await sender.group_send(kept, {"type": "x", "group": "kept"})

    # Redis delivers in publish order: had "left" still been subscribed, it came first.
    assert (await receive(reader, channel))["group"] == "kept"


async def test_the_last_group_left_and_a_new_one_joined_still_receives(layers):
    reader, sender = layers
    old, new = group_name(), group_name()
    channel = await reader.new_channel()
    await reader.group_add(old, channel)
    await reader.group_discard(old, channel)  # no subscription left: the receiver idles

    await reader.group_add(new, channel)
    await sender.group_send(new, {"type": "x", "n": 3})

    assert (await receive(reader, channel))["n"] == 3


async def test_a_dropped_subscription_connection_is_reconnected_and_resubscribed(layers, redis_url):
    reader, sender = layers
    admin = redis.Redis.from_url(redis_url)
    before = {c["id"] for c in admin.client_list(_type="pubsub")}
    group, channel = group_name(), await reader.new_channel()
    await reader.group_add(group, channel)
    # Subscribing only sends the command: Redis may serve this CLIENT LIST first.
    ours = await async_wait_for(
        lambda: [c for c in admin.client_list(_type="pubsub") if c["id"] not in before],
        timeout=TIMEOUT,
        what="the reader's subscription connection",
    )
    assert len(ours) == 1

    admin.client_kill_filter(_id=ours[0]["id"])

    # Pub/sub drops what is published while nobody listens: send until one arrives. One
    # receive waits throughout, as a consumer's does (a cancelled receive unsubscribes).
    deadline = asyncio.get_running_loop().time() + 10 * TIMEOUT
    receiving = asyncio.ensure_future(reader.receive(channel))
    while not receiving.done():
        assert asyncio.get_running_loop().time() < deadline, "never resubscribed"
        await sender.group_send(group, {"type": "x", "after": "reconnect"})
        await asyncio.wait({receiving}, timeout=0.5)
    assert receiving.result() == {"type": "x", "after": "reconnect"}
    admin.close()
