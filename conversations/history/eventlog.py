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
import logging
import time
from typing import Any

from conversations.runs.control import reaches_other_processes
from conversations.runs.db import db
from conversations.runs.publisher import FLUSH_INTERVAL, Entry
from conversations.selectors import events_after
from engine.loops import PerLoop

logger = logging.getLogger(__name__)

# The channel this process's event loop holds for its life (see keep_listening).
_listening: PerLoop[dict[str, str]] = PerLoop(dict)


async def keep_listening(layer: Any) -> None:
    """Hold one channel of the layer for the life of the process's event loop.

    channels_redis's pub/sub receiver sleeps 100 ms at a time while its process holds no
    subscription: once the last socket of a server closed, the first frames to the next
    one waited for the end of such a sleep. A channel that never closes keeps the receiver
    reading.
    """
    if not reaches_other_processes(layer):
        return
    held = _listening.get()
    if "channel" in held:
        return
    held["channel"] = ""  # taken before the await: sockets connecting meanwhile skip it
    try:
        held["channel"] = await layer.new_channel("agentsite.listening.")
    except Exception:  # the socket works without it; the next connect tries again
        del held["channel"]
        logger.warning("could not hold a listening channel", exc_info=True)


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
