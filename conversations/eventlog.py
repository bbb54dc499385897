"""The conversation event log: durable rows plus a hot tail of not-yet-flushed events.

The publisher writes the database in batches (a couple of writes a second) but sends
frames immediately. Frames sent but not yet flushed live in the "tail": a Redis list in
team mode (the reader may be another process), a list in process memory in embedded mode.
The publisher appends an event to the tail before sending its frame and drops it once its
row committed, so a reader that joined the channel-layer group first, then reads the tail,
then the rows, misses nothing: an event is in the group stream, in the tail, or (flushed
before it left the tail) in the rows.

The tail is written once per frame, so it is append-only and cheap: one in-memory append,
or one non-blocking ``RPUSH`` on the publisher's loop (never the whole tail re-written).
"""

from __future__ import annotations

import json
import threading
from functools import cache
from typing import Any

from django.conf import settings

from conversations.models import RunEvent
from engine.loops import PerLoop

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)
TAIL_TTL_SECONDS = 3600
TAIL_CONNECTIONS = 32  # per event loop; an append holds one for a single round trip


def tail_key(conversation_id: int) -> str:
    return f"agentsite:eventtail:{conversation_id}"


class MemoryTail:
    """Embedded mode: the publisher and every reader share this process."""

    def __init__(self) -> None:
        self._entries: dict[int, list[Entry]] = {}
        self._lock = threading.Lock()  # readers run in ORM threads

    async def append(self, conversation_id: int, entry: Entry) -> None:
        with self._lock:
            self._entries.setdefault(conversation_id, []).append(entry)

    async def drop(self, conversation_id: int, count: int) -> None:
        with self._lock:
            entries = self._entries.get(conversation_id, [])
            del entries[:count]
            if not entries:
                self._entries.pop(conversation_id, None)

    def get(self, conversation_id: int) -> list[Entry]:
        with self._lock:
            return list(self._entries.get(conversation_id, ()))

    def reset(self) -> None:
        with self._lock:
            self._entries.clear()


class RedisTail:
    """Team mode: a Redis list per conversation, written from the publisher's event loop."""

    def __init__(self, url: str) -> None:
        import redis
        import redis.asyncio

        self._sync = redis.Redis.from_url(url)
        # One asyncio client per event loop (a client's connections belong to one loop).
        # A blocking pool: with more runs appending at once than it has connections, an
        # append waits for a free one instead of failing ("Too many connections" at 100).
        self._clients = PerLoop(
            lambda: redis.asyncio.Redis(
                connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                    url, max_connections=TAIL_CONNECTIONS, timeout=None
                )
            )
        )

    def _client(self) -> Any:
        return self._clients.get()

    async def append(self, conversation_id: int, entry: Entry) -> None:
        key = tail_key(conversation_id)
        client = self._client()
        if await client.rpush(key, json.dumps(entry)) == 1:
            await client.expire(key, TAIL_TTL_SECONDS)  # a crashed publisher's tail goes

    async def drop(self, conversation_id: int, count: int) -> None:
        await self._client().ltrim(tail_key(conversation_id), count, -1)

    def get(self, conversation_id: int) -> list[Entry]:
        raw_entries = self._sync.lrange(tail_key(conversation_id), 0, -1)
        return [tuple(json.loads(raw)) for raw in raw_entries]


@cache
def _tail_for(redis_url: str) -> MemoryTail | RedisTail:
    return RedisTail(redis_url) if redis_url else MemoryTail()


def tail() -> MemoryTail | RedisTail:
    return _tail_for(getattr(settings, "REDIS_URL", "") or "")


async def tail_append(conversation_id: int, entry: Entry) -> None:
    await tail().append(conversation_id, entry)


async def tail_drop(conversation_id: int, count: int) -> None:
    """Forget the oldest ``count`` entries (their rows committed)."""
    await tail().drop(conversation_id, count)


def tail_get(conversation_id: int) -> list[Entry]:
    return tail().get(conversation_id)


def tail_reset() -> None:
    """Forget every in-memory tail (tests: conversation ids repeat across databases)."""
    store = tail()
    if isinstance(store, MemoryTail):
        store.reset()


def events_after(
    conversation_id: int, after_seq: int = 0, *, run_id: int | None = None
) -> list[Entry]:
    """Every event with ``seq > after_seq``, from the tail and the rows, once each, in order."""
    tail_entries = tail_get(conversation_id)
    rows = RunEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    merged: dict[int, Entry] = {
        seq: (seq, rid, channel, payload)
        for seq, rid, channel, payload in rows.values_list("seq", "run_id", "channel", "payload")
    }
    for entry in tail_entries:
        if entry[0] > after_seq and (run_id is None or entry[1] == run_id):
            merged.setdefault(entry[0], entry)
    return [merged[seq] for seq in sorted(merged)]
