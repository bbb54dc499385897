"""Reading the event log as a live reader does.

Frames go out before their events are written (:mod:`conversations.runs.publisher`
writes them within ``FLUSH_INTERVAL``), so a reader that joined a conversation's group
mid-run may receive a frame numbered past what the log held when it read it: the events
in between were sent before it joined. :func:`read_through` waits for them to reach the
log. When no frame follows (the run is waiting), a reader reads the log once more
``REREAD_AFTER`` its first read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable
from typing import Any

from conversations.runs.control import reaches_other_processes
from conversations.runs.db import db
from conversations.runs.publisher import FLUSH_INTERVAL, Entry
from conversations.selectors import events_after
from core import runtime

logger = logging.getLogger(__name__)


class HeldChannel:
    """One channel of the layer held for the life of the process's runtime.

    channels_redis's pub/sub receiver sleeps 100 ms at a time while its process holds no
    subscription: once the last socket of a server closed, the first frames to the next
    one waited for the end of such a sleep. A channel that never closes keeps the receiver
    reading. A part of the process's runtime (its closing lets the channel go with the
    layer).
    """

    def __init__(self) -> None:
        self.channel: str | None = None
        self._taking = False

    async def hold(self, layer: Any) -> None:
        """Take the channel unless held (or being taken): a socket's connect calls this,
        so a failed take is tried again by the next one."""
        if not reaches_other_processes(layer) or self.channel is not None or self._taking:
            return
        self._taking = True  # before the await: sockets connecting meanwhile skip it
        try:
            self.channel = await layer.new_channel("agentsite.listening.")
        except Exception:  # the socket works without it
            logger.warning("could not hold a listening channel", exc_info=True)
        finally:
            self._taking = False


async def keep_listening(layer: Any) -> None:
    """Hold the runtime's listening channel (see :class:`HeldChannel`)."""
    await runtime.part(HeldChannel).hold(layer)


async def release_channel(
    layer: Any, channel: str, receiving: asyncio.Future[Any] | None = None
) -> None:
    """Give back a reader's ``channel`` once the reader is gone, ending ``receiving``, its
    last ``receive()`` (or, without one, a receive made for the purpose).

    channels_redis's pub/sub layer unsubscribes a channel when a ``receive()`` on it is
    cancelled while it waits: its only clean-up (it has no call to delete a channel). A
    receive that already returned a message cleans nothing up, and channels' consumer
    loop can end with its last receive in that state (a disconnect and a live frame
    arriving together, channels_redis#276): the channel stayed subscribed for the life of
    the process. So the wait that gets cancelled here is always a waiting one: messages
    still queued for the channel are dropped (their reader is gone) until one waits.
    """
    if not reaches_other_processes(layer):
        return  # the in-memory layer drops an empty channel's queue by itself
    if receiving is None:
        receiving = asyncio.ensure_future(layer.receive(channel))
    await asyncio.sleep(0)  # a receive made just now runs up to its wait (or its message)
    while receiving.done():
        if receiving.cancelled():
            return  # cancelled by its owner already: waiting, it cleaned up then
        receiving.exception()  # retrieved: a failed receive is not worth a warning
        receiving = asyncio.ensure_future(layer.receive(channel))
        await asyncio.sleep(0)
    receiving.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await receiving


# Clean-ups that run after their reader is gone, kept until they finish.
_cleaning_up: set[asyncio.Future[Any]] = set()


def clean_up_soon(cleaning: Awaitable[Any]) -> None:
    """Run ``cleaning`` on the running loop, after its reader is gone (kept referenced
    until it finishes; a failure is logged)."""
    task = asyncio.ensure_future(cleaning)
    _cleaning_up.add(task)
    task.add_done_callback(_cleaned_up)


def _cleaned_up(task: asyncio.Future[Any]) -> None:
    _cleaning_up.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("a reader's clean-up failed", exc_info=task.exception())


class LiveSubscription:
    """A reader's place in a group of the layer: its own channel, in the group. Given back
    once (:meth:`leave`), however the reader ended; a join the reader's caller abandoned
    midway (the client left) is given back when it completes."""

    def __init__(self, layer: Any, group: str, channel: str) -> None:
        self.layer, self.group, self.channel = layer, group, channel
        self.left = False

    @classmethod
    async def join(cls, layer: Any, group: str) -> LiveSubscription:
        joining = asyncio.ensure_future(cls._join(layer, group))
        try:
            return await asyncio.shield(joining)
        except asyncio.CancelledError:
            joining.add_done_callback(cls._abandoned)
            raise

    @classmethod
    async def _join(cls, layer: Any, group: str) -> LiveSubscription:
        channel = await layer.new_channel()
        subscription = cls(layer, group, channel)
        try:
            await layer.group_add(group, channel)
        except BaseException:
            await subscription.leave()
            raise
        return subscription

    @classmethod
    def _abandoned(cls, joining: asyncio.Future[LiveSubscription]) -> None:
        if not joining.cancelled() and joining.exception() is None:
            clean_up_soon(joining.result().leave())

    async def leave(self, receiving: asyncio.Future[Any] | None = None) -> None:
        """Leave the group and give the channel back (``receiving``: the reader's last
        receive, if it has one)."""
        if self.left:
            return
        self.left = True
        try:
            await self.layer.group_discard(self.group, self.channel)
        finally:
            await release_channel(self.layer, self.channel, receiving)


# How long a reader waits for sent events to be written (several of the writer's rounds).
REFILL_TIMEOUT = 6 * FLUSH_INTERVAL
REFILL_POLL = 0.1
# By then, what was sent before a reader's first read is written (the writer's round).
REREAD_AFTER = 2 * FLUSH_INTERVAL


async def read_through(conversation_id: int, after: int, through: int) -> list[Entry]:
    """The logged events numbered after ``after``, once they include ``through`` (or
    after ``REFILL_TIMEOUT``, with what the log holds then)."""
    read = db(events_after)
    deadline = time.monotonic() + REFILL_TIMEOUT
    while True:
        entries = await read(conversation_id, after)
        if entries and entries[-1][0] >= through:
            return entries
        if time.monotonic() >= deadline:
            logger.warning(
                "events %s-%s of conversation %s never reached the log",
                after + 1, through, conversation_id,
            )  # fmt: skip
            return entries
        await asyncio.sleep(REFILL_POLL)
