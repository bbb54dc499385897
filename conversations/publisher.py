"""Engine events -> durable event log + the conversation's channel-layer group.

One :class:`RunPublisher` per run, owned by the coroutine executing it (the only writer of
the conversation's event sequence while the run is active). Answer deltas are coalesced
adaptively: a delta arriving on an idle stream goes out at once; while frames flow, later
deltas are batched into at most one frame per ``FRAME_INTERVAL``. Log rows are written in
batches (at most ~2 writes a second), except the events that must be durable before work
continues (a tool call about to run, the end of the run). A run that answered writes its
last events in the transaction that saves the answer (:meth:`RunPublisher.write_last`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from agentsite import serverloop
from conversations import eventlog
from conversations.asyncdb import db
from conversations.models import Conversation, Message, Run, RunEvent
from conversations.rendering import RunView, build_run_view
from engine.events import AgentEvent, AnswerDelta, ErrorEvent, IterationDone
from engine.loops import PerLoop

logger = logging.getLogger(__name__)
T = TypeVar("T")

FRAME_INTERVAL = 0.05
# A delta arriving at least this long after the previous one means the stream is not
# bunching up: it goes out at once. 20 tokens/s (one every 50 ms) must never wait, even
# when network and scheduling jitter bring two tokens 30 ms apart.
IDLE_GAP = 0.025
# Sending a frame normally takes well under a millisecond; when it takes this long the
# process is saturated, and deltas are batched even if they trickle in (each costs a frame).
BUSY_PUBLISH_COST = 0.01
FLUSH_INTERVAL = 0.5
IMMEDIATE_FLUSH = {
    ("step", "iteration", "start"),
    ("done", None, None),
    ("error", None, None),
    ("followup", None, None),
}


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def _flush_key(channel: str, payload: dict[str, Any]) -> tuple[str, Any, Any]:
    if channel in ("done", "error", "followup"):
        return (channel, None, None)
    return (channel, payload.get("type"), payload.get("status"))


class RunPublisher:
    def __init__(self, *, run_id: int, conversation_id: int, start_seq: int) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.seq = start_seq
        self.view = RunView(run_id=run_id)
        self.layer = get_channel_layer()
        self.group = conversation_group(conversation_id)
        self.frames_sent = 0
        self.db_writes = 0
        self._unflushed: list[eventlog.Entry] = []
        self._pending_delta = ""
        self._last_frame_at = 0.0
        self._last_delta_at = 0.0
        self._publish_cost = 0.0  # moving average of one frame's send time
        self._delta_task: asyncio.Task | None = None
        self._lock = asyncio.Lock()
        self._flush_lock = asyncio.Lock()

    # public -------------------------------------------------------------------
    @property
    def next_seq(self) -> int:
        """The number the next frame gets (with no delta pending, the next event's)."""
        return self.seq + 1

    async def on_event(self, event: AgentEvent) -> None:
        """The engine's ``on_event`` callback."""
        if isinstance(event, AnswerDelta):
            await self._on_delta(event.content)
            return
        await self.send_pending_delta()
        await self.publish(event.channel, event.to_dict())

    async def publish(self, channel: str, payload: dict[str, Any]) -> int:
        async with self._lock:
            self._last_frame_at = time.monotonic()  # when this frame started going out
            self.seq += 1
            seq = self.seq
            entry: eventlog.Entry = (seq, self.run_id, channel, payload)
            self._unflushed.append(entry)
            await eventlog.tail_append_and_send(
                self.conversation_id, entry, self.layer, self.group, self._frame(entry)
            )
            self.frames_sent += 1
            cost = time.monotonic() - self._last_frame_at
            self._publish_cost = 0.8 * self._publish_cost + 0.2 * cost
        if _flush_key(channel, payload) in IMMEDIATE_FLUSH:
            await self.flush()
        else:
            log_writer().mark_dirty(self)
        return seq

    async def write_last(
        self, channel: str, payload: dict[str, Any], save: Callable[[list[eventlog.Entry]], T]
    ) -> tuple[eventlog.Entry, T]:
        """Number the run's last event and write it, with the events not written yet, in the
        transaction that closes the run: ``save(entries)`` runs on a database thread and
        writes them with :func:`write_event_rows`. One database write ends a run instead of
        two (the close, then the log). Its frame goes out with :meth:`send_written` (the
        caller may render it with what ``save`` returned). Nothing is published after it.
        """
        async with self._flush_lock:
            async with self._lock:
                self.seq += 1
                entry: eventlog.Entry = (self.seq, self.run_id, channel, payload)
                earlier = list(self._unflushed)
                try:
                    saved = await db(save)([*earlier, entry])
                except BaseException:
                    self.seq -= 1  # not written: the number is free again
                    raise
            await self._forget_flushed(len(earlier))
        return entry, saved

    async def send_written(self, entry: eventlog.Entry) -> None:
        """Send the frame of an event already in the rows (no tail: a reader that joins
        the group after this send finds the row)."""
        await self.layer.group_send(self.group, self._frame(entry))
        self.frames_sent += 1

    def _frame(self, entry: eventlog.Entry) -> dict[str, Any]:
        """The channel-layer message of ``entry``, its HTML rendered by the run's view."""
        seq, run_id, channel, payload = entry
        return {
            "type": "run.event",
            "seq": seq,
            "run_id": run_id,
            "channel": channel,
            "payload": payload,
            "html": self.view.apply(seq, channel, payload),
        }

    async def close(self) -> None:
        """Send pending deltas and write every event still in memory."""
        await self.send_pending_delta()
        if self._delta_task is not None and not self._delta_task.done():
            # Let the timer finish (it finds the buffer empty): cancelling it could land
            # mid-send and lose a frame; abandoning it leaves a task behind the loop.
            await self._delta_task
        await self.flush()
        log_writer().forget(self)

    async def flush(self) -> None:
        """Write this run's unflushed events now (events that must be durable at once)."""
        await _flush_together([self])

    async def _take_batch(self) -> list[eventlog.Entry]:
        async with self._lock:
            return list(self._unflushed)

    async def _forget_flushed(self, count: int) -> None:
        """The first ``count`` events committed: they leave memory and the tail."""
        self.db_writes += 1
        if not count:  # a close that wrote only its own last event
            return
        async with self._lock:
            del self._unflushed[:count]
            await eventlog.tail_drop(self.conversation_id, count)

    # deltas -------------------------------------------------------------------
    @property
    def frame_interval(self) -> float:
        """Batching interval: ~50 ms, stretched when sending a frame gets slow (overload),
        so a saturated process sends fewer, larger frames instead of falling behind."""
        return max(FRAME_INTERVAL, 4 * self._publish_cost)

    async def _on_delta(self, content: str) -> None:
        if not content:
            return
        now = time.monotonic()
        # Idle = the previous delta came a while ago (not: the previous *frame* went out a
        # while ago, which phase-locks a steady 20 tokens/s stream into waiting ~25 ms).
        idle = now - self._last_delta_at >= IDLE_GAP and self._publish_cost < BUSY_PUBLISH_COST
        self._last_delta_at = now
        if idle and not self._pending_delta:
            await self.publish("answer", {"status": "delta", "content": content})
            return
        self._pending_delta += content
        if self._delta_task is None or self._delta_task.done():
            delay = max(0.0, self.frame_interval - (now - self._last_frame_at))
            self._delta_task = asyncio.ensure_future(self._delayed_delta(delay))

    async def _delayed_delta(self, delay: float) -> None:
        await asyncio.sleep(delay)
        await self._send_pending_delta()

    async def _send_pending_delta(self) -> None:
        content, self._pending_delta = self._pending_delta, ""
        if content:
            await self.publish("answer", {"status": "delta", "content": content})

    async def send_pending_delta(self) -> None:
        # Never cancel the delayed send: it may already be inside publish() (seq taken,
        # view applied, frame not yet sent), and cancelling it there loses the frame for
        # live clients. Sending now empties the buffer; the timer then finds nothing.
        await self._send_pending_delta()


class LogWriter:
    """Writes the pending events of every run on one event loop in one transaction.

    A write per run twice a second was 400 transactions a second for 200 streaming runs in
    one worker; the writer takes the batch of every publisher with unflushed events each
    ``FLUSH_INTERVAL`` and writes them together. Each run still gets at most ~2 log writes
    a second, and events that must be durable at once go through the run's own flush().
    """

    def __init__(self) -> None:
        self._dirty: dict[int, RunPublisher] = {}
        self._task: asyncio.Task | None = None
        self._writing = False

    def mark_dirty(self, publisher: RunPublisher) -> None:
        self._dirty[id(publisher)] = publisher
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._flush_later())

    def forget(self, publisher: RunPublisher) -> None:
        self._dirty.pop(id(publisher), None)
        idle = not self._dirty and not self._writing
        if idle and self._task is not None and not self._task.done():
            self._task.cancel()  # only ever while sleeping: no timer outlives the runs

    async def _flush_later(self) -> None:
        await asyncio.sleep(FLUSH_INTERVAL)
        publishers, self._dirty = list(self._dirty.values()), {}
        self._writing = True
        try:
            await _flush_together(publishers)
        except Exception:  # keep the events in memory (and the tail); the next round retries
            logger.exception("writing the event log of %d runs failed", len(publishers))
            for publisher in publishers:
                self._dirty.setdefault(id(publisher), publisher)
        finally:
            self._writing = False
        if self._dirty:
            self._task = asyncio.ensure_future(self._flush_later())


_writers: PerLoop[LogWriter] = PerLoop(LogWriter)


def log_writer() -> LogWriter:
    return _writers.get()


async def _flush_together(publishers: list[RunPublisher]) -> None:
    """Write the unflushed events of ``publishers`` in one transaction.

    Events leave a publisher's memory and the tail only once their rows committed: until
    then a reader finds them in the tail, so a page load or a reconnect during the write
    never misses them. Each publisher's flush lock keeps its batches in order.
    """
    async with contextlib.AsyncExitStack() as locks:
        for publisher in publishers:
            await locks.enter_async_context(publisher._flush_lock)
        batches = [(p, await p._take_batch()) for p in publishers]
        batches = [(p, batch) for p, batch in batches if batch]
        if not batches:
            return
        await db(_write_event_batches)([(p.conversation_id, batch) for p, batch in batches])
        for publisher, batch in batches:
            await publisher._forget_flushed(len(batch))


def _write_event_batches(batches: list[tuple[int, list[eventlog.Entry]]]) -> None:
    """All rows in one transaction, each conversation's high-water mark raised once.

    Plain SQL on purpose: this runs twice a second for every streaming process, and the
    ORM's ``bulk_create`` (a model instance and per-field preparation per row) plus a
    ``Case``/``Greatest`` update cost about 0.1 ms per event, more than the rest of a
    frame's path. Values still go through the fields' own database preparation (JSON and
    datetimes per backend).
    """
    marks = [(conversation_id, batch[-1][0]) for conversation_id, batch in batches]
    with transaction.atomic():
        write_event_rows(batches)
        _raise_marks(marks)


_EVENT_COLUMNS = "run_id, conversation_id, seq, channel, payload, created_at"


def write_event_rows(batches: list[tuple[int, list[eventlog.Entry]]]) -> None:
    """Insert the rows of ``batches`` (conversation id, entries), inside the caller's
    transaction; the conversations' high-water marks are the caller's to raise.

    PostgreSQL: one ``COPY``. A statement per row took 48 ms (15 ms of CPU) for the 550
    rows of 50 streams' half second, and while it ran a third of the tokens that came late
    at 50 streams were waiting; ``COPY`` takes 14-19 ms (5-6 ms of CPU). Other databases
    (SQLite): one ``executemany``.
    """
    meta = RunEvent._meta
    created_at = meta.get_field("created_at").get_db_prep_value(timezone.now(), connection)
    payload_field = meta.get_field("payload")
    rows = [
        (run_id, conversation_id, seq, channel,
         payload_field.get_db_prep_save(payload, connection), created_at)
        for conversation_id, batch in batches
        for seq, run_id, channel, payload in batch
    ]  # fmt: skip
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            copy_sql = f"COPY {meta.db_table} ({_EVENT_COLUMNS}) FROM STDIN"
            with cursor.cursor.copy(copy_sql) as copy:  # psycopg's own cursor
                for row in rows:
                    copy.write_row(row)
        else:
            cursor.executemany(
                f"INSERT INTO {meta.db_table} ({_EVENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)",
                rows,
            )


def _raise_marks(marks: list[tuple[int, int]]) -> None:
    """Raise each conversation's ``last_event_seq`` to its mark (never lower it).

    PostgreSQL: every mark in one ``UPDATE ... FROM unnest``; other databases (SQLite):
    one ``executemany``.
    """
    table = Conversation._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"UPDATE {table} AS c SET last_event_seq = GREATEST(c.last_event_seq, v.seq) "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, seq) WHERE c.id = v.id",
                [[conversation_id for conversation_id, _seq in marks], [seq for _id, seq in marks]],
            )
        else:
            cursor.executemany(
                f"UPDATE {table} SET last_event_seq = CASE "
                "WHEN last_event_seq > %s THEN last_event_seq ELSE %s END WHERE id = %s",
                [(seq, seq, conversation_id) for conversation_id, seq in marks],
            )


def publish_events_sync(*, run: Run, events: list[AgentEvent]) -> None:
    """Append events for a run that no coroutine owns any more (sweeps, launch failures)."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=run.conversation_id)
        stored = list(
            RunEvent.objects.filter(run=run)
            .order_by("seq")
            .values_list("seq", "channel", "payload")
        )
        view = build_run_view(run.pk, stored, run_inject_ids(run.pk))
        seq = conversation.last_event_seq
        frames = []
        for event in events:
            seq += 1
            payload = event.to_dict()
            RunEvent.objects.create(
                conversation=conversation, run=run, seq=seq, channel=event.channel, payload=payload
            )
            frames.append((seq, event.channel, payload, view.apply(seq, event.channel, payload)))
        conversation.last_event_seq = seq
        conversation.save(update_fields=["last_event_seq"])
    layer = get_channel_layer()
    for seq, channel, payload, html in frames:
        serverloop.call(
            layer.group_send,
            conversation_group(run.conversation_id),
            {
                "type": "run.event",
                "seq": seq,
                "run_id": run.pk,
                "channel": channel,
                "payload": payload,
                "html": html,
            },
        )


def publish_interrupted(*, run_id: int) -> None:
    """Close an interrupted run's open tool cards and report it as failed."""
    run = Run.objects.get(pk=run_id)
    stored = list(
        RunEvent.objects.filter(run=run).order_by("seq").values_list("seq", "channel", "payload")
    )
    view = build_run_view(run.pk, stored, [])
    events: list[AgentEvent] = [
        IterationDone(card.iteration, card.tool_name, "[interrupted]", "interrupted", 0.0)
        for card in view.open_cards()
    ]
    events.append(ErrorEvent(run.error or "The run was interrupted.", "failed"))
    publish_events_sync(run=run, events=events)


def run_inject_ids(run_id: int) -> list[int]:
    """Delivered follow-ups of a run, in delivery order (matches its inject events)."""
    return list(
        Message.objects.filter(run_id=run_id, kind=Message.Kind.INJECT, delivered_at__isnull=False)
        .order_by("delivered_at", "seq")
        .values_list("pk", flat=True)
    )
