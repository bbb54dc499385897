"""The conversation event log: durable rows plus a hot tail of not-yet-flushed events.

The publisher writes the database in batches (a couple of writes a second) but sends
frames immediately. Frames sent but not yet flushed live in the "tail": a Redis list in
team mode (the reader may be another process), a list in process memory in embedded mode.
The publisher appends an event to the tail before sending its frame and drops it once its
row committed, so a reader that joined the channel-layer group first, then reads the tail,
then the rows, misses nothing: an event is in the group stream, in the tail, or (flushed
before it left the tail) in the rows.

The tail is written once per frame, so it is append-only and cheap: one in-memory append,
or an ``RPUSH`` sent in one pipeline with the frame's ``PUBLISH`` (never the whole tail
re-written).
"""

from __future__ import annotations

import json
import threading
from functools import cache
from typing import Any

from django.conf import settings

from agentsite.redis_batch import batcher
from agentsite.resp import Command
from conversations.models import RunEvent

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)
TAIL_TTL_SECONDS = 3600


def tail_key(conversation_id: int) -> str:
    return f"agentsite:eventtail:{conversation_id}"


class Tail:
    """Events sent as frames but not yet in the rows, per conversation, oldest first."""

    async def append(self, conversation_id: int, entry: Entry) -> None:
        raise NotImplementedError

    async def drop(self, conversation_id: int, count: int) -> None:
        raise NotImplementedError

    def get(self, conversation_id: int) -> list[Entry]:
        raise NotImplementedError

    async def append_and_send(
        self, conversation_id: int, entry: Entry, layer: Any, group: str, message: dict
    ) -> None:
        """Append ``entry``, then send its frame to the channel-layer group."""
        await self.append(conversation_id, entry)
        await layer.group_send(group, message)


class MemoryTail(Tail):
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


class RedisTail(Tail):
    """Team mode: a Redis list per conversation, written from the publisher's event loop.

    Writes go through the loop's shared pipelines (:mod:`agentsite.redis_batch`): the
    appends of every run of a worker share one connection and, under load, round trips.
    """

    def __init__(self, url: str) -> None:
        import redis

        self.url = url
        self._sync = redis.Redis.from_url(url)

    @staticmethod
    def _append_commands(conversation_id: int, entry: Entry) -> tuple[Command, Command]:
        key = tail_key(conversation_id)
        # The expiry is renewed on every append: a crashed publisher's tail goes.
        return ("RPUSH", key, json.dumps(entry)), ("EXPIRE", key, TAIL_TTL_SECONDS)

    async def append(self, conversation_id: int, entry: Entry) -> None:
        await batcher(self.url).execute(*self._append_commands(conversation_id, entry))

    async def append_and_send(
        self, conversation_id: int, entry: Entry, layer: Any, group: str, message: dict
    ) -> None:
        """Append, then publish the frame: one pipeline when the layer uses this Redis."""
        if getattr(layer, "publish_url", None) != self.url:
            await super().append_and_send(conversation_id, entry, layer, group, message)
            return
        await batcher(self.url).execute(
            *self._append_commands(conversation_id, entry),
            layer.publish_command(group, message),
        )

    async def drop(self, conversation_id: int, count: int) -> None:
        await batcher(self.url).execute(("LTRIM", tail_key(conversation_id), count, -1))

    def get(self, conversation_id: int) -> list[Entry]:
        raw_entries = self._sync.lrange(tail_key(conversation_id), 0, -1)
        return [tuple(json.loads(raw)) for raw in raw_entries]


@cache
def _tail_for(redis_url: str) -> Tail:
    return RedisTail(redis_url) if redis_url else MemoryTail()


def tail() -> Tail:
    return _tail_for(getattr(settings, "REDIS_URL", "") or "")


async def tail_append_and_send(
    conversation_id: int, entry: Entry, layer: Any, group: str, message: dict[str, Any]
) -> None:
    """Append ``entry`` to the tail, then send its frame to the group (tail first: a
    reader that joined the group after the send finds the entry in the tail)."""
    await tail().append_and_send(conversation_id, entry, layer, group, message)


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
