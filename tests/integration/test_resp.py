"""The hiredis connection behind team mode's batched Redis commands, against real servers."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agentsite.resp import RedisPyPipeline, RespConnection, Subscription, pipelined, plain_options
from tests.integration.stack import async_wait_for, start_redis

pytestmark = pytest.mark.integration


def key(name: str) -> str:
    return f"agentsite:test:{secrets.token_hex(6)}:{name}"


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """A private server that wants a password: (its TCP URL, the password, its socket)."""
    password, socket_path = secrets.token_hex(12), tmp_path / "redis.sock"
    url, server = start_redis(tmp_path, password=password, unix_socket=socket_path)
    try:
        yield url, password, socket_path
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop()


async def test_replies_come_back_to_their_requests_in_order(redis_url):
    connection, name = pipelined(redis_url), key("list")
    assert isinstance(connection, RespConnection)
    try:
        replies = await asyncio.gather(
            *(
                connection.execute([("RPUSH", name, f"v{i}"), ("EXPIRE", name, 60)])
                for i in range(50)
            )
        )
        assert [reply[0] for reply in replies] == list(range(1, 51))
        assert all(reply[1] == 1 for reply in replies)  # Redis's own reply, no callbacks
        listed, missing = await connection.execute([("LRANGE", name, 0, 2), ("GET", key("none"))])
        assert listed == [b"v0", b"v1", b"v2"] and missing is None
    finally:
        await connection.close()


async def test_an_error_reply_is_returned_in_its_place(redis_url):
    connection, name = pipelined(redis_url), key("string")
    try:
        stored, wrong, length = await connection.execute(
            [("SET", name, "x", "EX", 60), ("RPUSH", name, "a"), ("STRLEN", name)]
        )
        assert stored == b"OK" and length == 1
        assert isinstance(wrong, redis.ResponseError) and "WRONGTYPE" in str(wrong)
    finally:
        await connection.close()


async def test_the_url_selects_the_database(redis_url):
    other_db = redis_url.rsplit("/", 1)[0] + "/7"
    connection, name = pipelined(other_db), key("db")
    try:
        await connection.execute([("SET", name, "seven", "EX", 60)])
        assert redis.Redis.from_url(other_db).get(name) == b"seven"
        assert redis.Redis.from_url(redis_url).get(name) is None
    finally:
        await connection.close()


async def test_a_cancelled_callers_replies_are_not_given_to_the_next_one(redis_url):
    connection, name = pipelined(redis_url), key("blocking")
    try:
        await connection.execute([("PING",)])  # connected: the next request is written at once
        blocked = asyncio.ensure_future(connection.execute([("BLPOP", name, 10)]))
        await asyncio.sleep(0)  # one loop turn: the BLPOP is on the wire
        blocked.cancel()
        redis.Redis.from_url(redis_url).rpush(name, "late")  # answers the BLPOP

        assert await connection.execute([("ECHO", "mine")]) == [b"mine"]
    finally:
        await connection.close()


async def test_a_killed_connection_fails_its_request_and_the_next_one_reconnects(redis_url):
    connection, name = pipelined(redis_url), key("killed")
    admin = redis.Redis.from_url(redis_url)
    try:
        await connection.execute([("CLIENT", "SETNAME", "resp-under-test")])
        blocked = asyncio.ensure_future(connection.execute([("BLPOP", name, 10)]))
        await asyncio.sleep(0)
        ours = [c["id"] for c in admin.client_list() if c["name"] == "resp-under-test"]
        admin.client_kill_filter(_id=ours[0])

        with pytest.raises(redis.ConnectionError):
            await asyncio.wait_for(blocked, timeout=5)
        assert await connection.execute([("PING",)]) == [b"PONG"]
    finally:
        await connection.close()


async def test_credentials_from_the_url_over_tcp_and_a_unix_socket(locked_redis):
    url, password, socket_path = locked_redis
    for address in (url, f"unix://:{password}@{socket_path}?db=2"):
        connection = pipelined(address)
        assert isinstance(connection, RespConnection)
        try:
            assert await connection.execute([("PING",)]) == [b"PONG"]
        finally:
            await connection.close()
    wrong = pipelined(url.replace(password, "not-the-password"))
    with pytest.raises(redis.ResponseError):
        await wrong.execute([("PING",)])


async def test_an_unreachable_server_is_a_connection_error():
    with pytest.raises(redis.ConnectionError):
        await pipelined("redis://127.0.0.1:1/0").execute([("PING",)])


def test_other_urls_use_redis_py():
    assert isinstance(pipelined("rediss://redis.example:6380/0"), RedisPyPipeline)
    assert isinstance(pipelined("redis://127.0.0.1:6379/0?socket_timeout=2"), RedisPyPipeline)


async def test_a_subscription_hands_over_messages_and_survives_a_killed_connection(redis_url):
    received: asyncio.Queue[tuple[bytes, bytes]] = asyncio.Queue()
    subscription = Subscription(
        plain_options(redis_url), lambda c, d: received.put_nowait((c, d)), reconnect_delay=0.05
    )
    admin = redis.Redis.from_url(redis_url)
    first, second, left = key("first"), key("second"), key("left")
    before = {c["id"] for c in admin.client_list(_type="pubsub")}

    async def next_message() -> tuple[bytes, bytes]:
        """The next message, past those "left" got before its unsubscribe took effect."""
        while (message := await asyncio.wait_for(received.get(), 5)) == (left.encode(), b"gone"):
            pass
        return message

    try:
        await subscription.subscribe(first)
        await subscription.subscribe(left)
        await subscription.unsubscribe(left)
        await async_wait_for(lambda: admin.publish(first, b"one") == 1, timeout=5, what="first")
        assert await next_message() == (first.encode(), b"one")
        await async_wait_for(lambda: admin.publish(left, b"gone") == 0, timeout=5, what="left")

        [ours] = [c["id"] for c in admin.client_list(_type="pubsub") if c["id"] not in before]
        admin.client_kill_filter(_id=ours)
        # A subscribe right after the loss reconnects with its own channel; the other one
        # is subscribed again by the reconnection that follows.
        await async_wait_for(lambda: not subscription._connection.connected, timeout=5, what="loss")
        await subscription.subscribe(second)

        await async_wait_for(lambda: admin.publish(first, b"two") == 1, timeout=5, what="again")
        await async_wait_for(lambda: admin.publish(second, b"three") == 1, timeout=5, what="new")
        assert await next_message() == (first.encode(), b"two")
        assert await next_message() == (second.encode(), b"three")
    finally:
        await subscription.close()
    await async_wait_for(lambda: admin.publish(first, b"closed") == 0, timeout=5, what="closed")


async def test_a_failing_message_handler_does_not_drop_the_subscription(redis_url, caplog):
    handled: list[bytes] = []

    def handle(_channel: bytes, data: bytes) -> None:
        if data == b"bad":
            raise ValueError("cannot handle this one")
        handled.append(data)

    subscription, name = Subscription(plain_options(redis_url), handle), key("faulty")
    admin = redis.Redis.from_url(redis_url)
    try:
        await subscription.subscribe(name)
        await async_wait_for(lambda: admin.publish(name, b"bad") == 1, timeout=5, what="bad")
        admin.publish(name, b"good")  # Redis delivers in order: after the failing one

        await async_wait_for(lambda: handled == [b"good"], timeout=5, what="the next message")
        assert "handling a message from Redis failed" in caplog.text
    finally:
        await subscription.close()
