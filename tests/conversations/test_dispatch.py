"""The consumer's dispatch loop: every message once, in order per source, one at a time."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import StopConsumer

from conversations.dispatch import dispatch_from


def queue_source(queue: asyncio.Queue) -> tuple[list[int], object]:
    """A source reading ``queue`` that records how many messages it has handed out."""
    taken: list[int] = []

    async def source():
        message = await queue.get()
        taken.append(message)
        return message

    return taken, source


async def test_every_message_of_both_sources_is_dispatched_in_each_sources_order():
    client, layer = asyncio.Queue(), asyncio.Queue()
    _, from_client = queue_source(client)
    _, from_layer = queue_source(layer)
    seen: list[tuple[str, int]] = []
    finished = asyncio.Event()

    async def dispatch(message):
        seen.append(message)
        if len(seen) == 40:
            finished.set()
            raise StopConsumer

    for n in range(20):
        layer.put_nowait(("layer", n))
        client.put_nowait(("client", n))
    with pytest.raises(StopConsumer):
        await dispatch_from([from_client, from_layer], dispatch)
    assert finished.is_set()
    assert [n for source, n in seen if source == "layer"] == list(range(20))
    assert [n for source, n in seen if source == "client"] == list(range(20))


async def test_a_slow_dispatch_holds_the_sources_back():
    layer = asyncio.Queue()
    taken, from_layer = queue_source(layer)
    release = asyncio.Event()
    dispatched: list[int] = []

    async def dispatch(message):
        dispatched.append(message)
        await release.wait()
        raise StopConsumer

    for n in range(10):
        layer.put_nowait(n)
    loop = asyncio.ensure_future(dispatch_from([from_layer], dispatch))
    while not dispatched:
        await asyncio.sleep(0)
    for _ in range(20):  # give the source every chance to read ahead
        await asyncio.sleep(0)
    assert len(taken) <= 3  # the message being dispatched, one queued, one held by the source
    release.set()
    with pytest.raises(StopConsumer):
        await loop


async def test_a_failing_source_ends_the_loop_with_its_error_and_stops_the_other():
    never = asyncio.Event()
    cancelled = asyncio.Event()

    async def idle_source():
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def broken_source():
        raise ConnectionError("the channel layer went away")

    async def dispatch(message):
        raise AssertionError("nothing was received")

    with pytest.raises(ConnectionError, match="went away"):
        await dispatch_from([idle_source, broken_source], dispatch)
    assert cancelled.is_set()
