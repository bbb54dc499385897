"""The channel layer of embedded mode: channels' in-memory layer without its per-message costs.

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
import time
from typing import Any

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

SWEEP_INTERVAL = 1.0


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
