"""The conversation event log: durable rows plus a hot tail of not-yet-flushed events.

The publisher writes the database in batches (a couple of writes a second) but sends
frames immediately. Frames sent but not yet flushed live in the cache "tail" (Redis in
team mode, process memory in embedded mode). A reader that joined the channel-layer group
first, then reads the tail, then the rows, misses nothing: an event is in the group stream,
in the tail, or (flushed before the tail was cleared) in the rows.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from conversations.models import RunEvent

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)
TAIL_TTL_SECONDS = 3600


def tail_key(conversation_id: int) -> str:
    return f"agentsite:eventtail:{conversation_id}"


def tail_set(conversation_id: int, entries: list[Entry]) -> None:
    """Called on the event loop itself: one in-memory or loopback-Redis write of a few
    entries is cheaper than the thread hop ``sync_to_async`` would add to every frame."""
    if entries:
        cache.set(tail_key(conversation_id), entries, TAIL_TTL_SECONDS)
    else:
        cache.delete(tail_key(conversation_id))


def tail_get(conversation_id: int) -> list[Entry]:
    return list(cache.get(tail_key(conversation_id)) or [])


def events_after(
    conversation_id: int, after_seq: int = 0, *, run_id: int | None = None
) -> list[Entry]:
    """Every event with ``seq > after_seq``, from the tail and the rows, once each, in order."""
    tail = tail_get(conversation_id)
    rows = RunEvent.objects.filter(conversation_id=conversation_id, seq__gt=after_seq)
    if run_id is not None:
        rows = rows.filter(run_id=run_id)
    merged: dict[int, Entry] = {
        seq: (seq, rid, channel, payload)
        for seq, rid, channel, payload in rows.values_list("seq", "run_id", "channel", "payload")
    }
    for entry in tail:
        if entry[0] > after_seq and (run_id is None or entry[1] == run_id):
            merged.setdefault(entry[0], entry)
    return [merged[seq] for seq in sorted(merged)]
