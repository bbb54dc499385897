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

from conversations.runs.db import db
from conversations.runs.publisher import FLUSH_INTERVAL, Entry
from conversations.selectors import events_after

logger = logging.getLogger(__name__)

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
