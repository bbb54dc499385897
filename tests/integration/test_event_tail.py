"""The Redis event tail and the batched channel layer: team mode's per-frame hot path."""

from __future__ import annotations

import asyncio
import secrets

import pytest
import redis
import redis.asyncio
from channels_redis.pubsub import RedisPubSubChannelLayer

from agentsite.channel_layer import RedisPubSubLayer
from agentsite.redis_batch import CommandBatcher, batcher
from agentsite.resp import pipelined
from conversations.eventlog import RedisTail

pytestmark = pytest.mark.integration


async def test_hundreds_of_concurrent_appends_land_in_order(redis_url):
    tail = RedisTail(redis_url)
    first = secrets.randbelow(10**9) * 1000  # keys of their own in a shared Redis
    conversations = range(first, first + 200)  # more runs than a connection pool would hold

    async def stream(conversation_id: int) -> None:
        for seq in range(1, 6):
            await tail.append(conversation_id, (seq, 7, "answer", {"content": f"w{seq}"}))

    await asyncio.gather(*(stream(c) for c in conversations))

    for conversation_id in conversations:
        entries = tail.get(conversation_id)
        assert [entry[0] for entry in entries] == [1, 2, 3, 4, 5]
    await tail.drop(first, 2)
    assert [entry[0] for entry in tail.get(first)] == [3, 4, 5]
    assert 0 < redis.Redis.from_url(redis_url).ttl(f"agentsite:eventtail:{first}") <= 3600


async def test_a_frame_sent_with_its_tail_entry_reaches_a_stock_channels_redis_reader(
    redis_url,
):
    """The batched PUBLISH keeps channels_redis's format: any of its receivers reads it,
    and by the time the frame arrives its entry is in the tail."""
    sender, reader = RedisPubSubLayer(hosts=[redis_url]), RedisPubSubChannelLayer(hosts=[redis_url])
    tail = RedisTail(redis_url)
    conversation_id = secrets.randbelow(10**9)
    group = f"conversation.{conversation_id}"
    channel = await reader.new_channel()
    await reader.group_add(group, channel)
    try:
        entry = (1, 9, "answer", {"content": "Hello"})
        message = {"type": "run.event", "seq": 1, "html": "<p>Hello</p>"}
        await tail.append_and_send(conversation_id, entry, sender, group, message)

        received = await asyncio.wait_for(reader.receive(channel), timeout=5)
        assert received == message
        assert tail.get(conversation_id) == [entry]

        await sender.group_send(group, {"type": "run.event", "seq": 2})
        assert (await asyncio.wait_for(reader.receive(channel), timeout=5))["seq"] == 2
    finally:
        await reader.flush()
        await sender.flush()


async def test_an_error_reply_fails_only_the_caller_whose_command_caused_it(redis_url):
    prefix = f"agentsite:test:{secrets.token_hex(8)}"
    redis.Redis.from_url(redis_url).set(f"{prefix}:string", "x", ex=60)
    good, bad = await asyncio.gather(
        batcher(redis_url).execute(
            ("RPUSH", f"{prefix}:list", "a"), ("EXPIRE", f"{prefix}:list", 60)
        ),
        batcher(redis_url).execute(("RPUSH", f"{prefix}:string", "a")),  # wrong type
        return_exceptions=True,
    )
    assert good == [1, 1]
    assert isinstance(bad, redis.ResponseError) and "WRONGTYPE" in str(bad)
    assert await batcher(redis_url).execute(("LLEN", f"{prefix}:list")) == [1]


async def test_a_connection_failure_reaches_every_waiting_caller():
    closed_port = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    unreachable = CommandBatcher(pipelined(closed_port))
    results = await asyncio.wait_for(
        asyncio.gather(
            unreachable.execute(("PING",)), unreachable.execute(("PING",)), return_exceptions=True
        ),
        timeout=10,
    )
    assert all(isinstance(result, redis.ConnectionError) for result in results)


class RecordingConnection:
    """A real Redis connection that notes the commands of each pipeline it sends."""

    def __init__(self, url: str) -> None:
        self.inner = pipelined(url)
        self.pipelines: list[list[tuple]] = []

    async def execute(self, commands):
        self.pipelines.append(list(commands))
        return await self.inner.execute(commands)

    async def close(self) -> None:
        await self.inner.close()


async def test_a_lone_caller_goes_at_once_and_callers_arriving_meanwhile_share_the_next(
    redis_url,
):
    key = f"agentsite:test:{secrets.token_hex(8)}"
    connection = RecordingConnection(redis_url)
    commands = CommandBatcher(connection)
    try:
        replies = await asyncio.gather(*(commands.execute(("INCR", key)) for _ in range(50)))
        assert replies == [[n] for n in range(1, 51)]  # in the order they were called
        assert [len(p) for p in connection.pipelines] == [1, 49]

        assert await commands.execute(("INCR", key), ("EXPIRE", key, 60)) == [51, 1]
        assert [len(p) for p in connection.pipelines] == [1, 49, 2]  # idle again: at once
    finally:
        await connection.close()
