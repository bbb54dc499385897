"""The embedded-mode channel layer keeps channels' in-memory semantics."""

from __future__ import annotations

import asyncio

import pytest
from channels.exceptions import ChannelFull

from agentsite import channel_layer
from agentsite.channel_layer import LocalChannelLayer


async def test_group_message_reaches_every_member_once_and_not_others():
    layer = LocalChannelLayer()
    a, b, outsider = [await layer.new_channel() for _ in range(3)]
    await layer.group_add("chat", a)
    await layer.group_add("chat", b)

    await layer.group_send("chat", {"type": "run.event", "seq": 1})

    assert await layer.receive(a) == {"type": "run.event", "seq": 1}
    assert await layer.receive(b) == {"type": "run.event", "seq": 1}
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(outsider), 0.05)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(layer.receive(a), 0.05)


async def test_receivers_never_share_a_message_dict():
    layer = LocalChannelLayer()
    a, b = await layer.new_channel(), await layer.new_channel()
    for channel in (a, b):
        await layer.group_add("chat", channel)
    message = {"type": "run.event", "html": "<p>x</p>"}
    await layer.group_send("chat", message)

    first = await layer.receive(a)
    first["html"] = "changed"

    assert await layer.receive(b) == {"type": "run.event", "html": "<p>x</p>"}
    assert message["html"] == "<p>x</p>"


async def test_full_channel_raises_on_send_and_misses_group_messages():
    layer = LocalChannelLayer(capacity=2)
    full, other = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat", full)
    await layer.group_add("chat", other)
    for seq in (1, 2):
        await layer.send(full, {"type": "x", "seq": seq})
    with pytest.raises(ChannelFull):
        await layer.send(full, {"type": "x", "seq": 3})

    await layer.group_send("chat", {"type": "x", "seq": 4})

    assert (await layer.receive(other))["seq"] == 4
    assert [(await layer.receive(full))["seq"] for _ in range(2)] == [1, 2]


async def test_expired_messages_are_dropped_and_their_channel_leaves_its_groups(monkeypatch):
    monkeypatch.setattr(channel_layer, "SWEEP_INTERVAL", 0.0)
    layer = LocalChannelLayer(expiry=1)
    gone, alive = await layer.new_channel(), await layer.new_channel()
    await layer.group_add("chat", gone)
    await layer.send(gone, {"type": "stale"})
    layer.channels[gone]._queue[0] = (0.0, {"type": "stale"})  # sent long ago
    await layer.group_add("chat", alive)

    await layer.group_send("chat", {"type": "fresh"})  # sweeps first: "gone" expired

    assert gone not in layer.groups["chat"]
    assert (await layer.receive(alive))["type"] == "fresh"
