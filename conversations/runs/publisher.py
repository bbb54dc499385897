"""Engine events -> the event log -> the conversation's live frames.

An event is written to the log (``RunEvent`` rows) before its frame is sent to the
conversation's channel-layer group, so the log is the only place events are kept: a
reader that joins the group and then reads the log misses nothing (an event is either in
the rows it read or arrives live afterwards) and drops live frames it already read, by
number.

Writes are group commits. One :class:`EventWriter` per event loop takes what every run
on the loop has ready, writes it in one transaction, sends the frames, and starts again.
Alone, an event waits for one small write. Under load one write carries the events of
many runs, and each run's answer deltas merge into one frame while the previous write is
in flight: the frame rate falls instead of a queue growing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import DatabaseError, transaction

from conversations.models import Conversation, Message, Run, RunEvent
from conversations.numbering import last_event_seq
from conversations.rendering import RunView, build_run_view
from engine.events import AgentEvent, AnswerDelta, ErrorEvent, IterationDone
from engine.loops import PerLoop

logger = logging.getLogger(__name__)

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)

# Answer deltas of one run go out at most this often while they arrive close together.
FRAME_INTERVAL = 0.05
# A delta arriving at least this long after the previous one is not part of a burst: it
# goes out at once (a steady 20 tokens/s stream never waits).
IDLE_GAP = 0.025
# A failed write is retried after these pauses (seconds) before the runs are told.
WRITE_RETRY_DELAYS = (0.2, 1.0, 3.0)


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def frame(entry: Entry, html: str) -> dict[str, Any]:
    """The channel-layer message of a logged event: its fields and its rendered HTML."""
    seq, run_id, channel, payload = entry
    return {
        "type": "run.event",
        "seq": seq,
        "run_id": run_id,
        "channel": channel,
        "payload": payload,
        "html": html,
    }


class RunPublisher:
    """The events of one run, numbered after ``start_seq`` (the run is the conversation's
    only writer of events while it is active)."""

    def __init__(self, *, run_id: int, conversation_id: int, start_seq: int) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.seq = start_seq
        self.view = RunView(run_id=run_id)
        self.layer = get_channel_layer()
        self.group = conversation_group(conversation_id)
        self.frames_sent = 0
        self.db_writes = 0
        self.failure: BaseException | None = None
        self._ready: list[Entry] = []
        self._delta = ""  # answer text not yet in an entry
        self._delta_due = False
        self._last_delta_at = 0.0
        self._last_delta_frame_at = 0.0
        self._delta_timer: asyncio.TimerHandle | None = None
        self._sent_seq = start_seq
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    # what the run calls ---------------------------------------------------------------
    async def on_event(self, event: AgentEvent) -> None:
        """The engine's ``on_event`` callback."""
        if isinstance(event, AnswerDelta):
            self._add_delta(event.content)
            return
        await self.publish(event.channel, event.to_dict())

    async def publish(self, channel: str, payload: dict[str, Any]) -> int:
        """Log and send one event (after the answer text so far); its number once sent."""
        self._raise_failure()
        self._take_delta()
        seq = self._add(channel, payload)
        writer().notify(self)
        await self._sent_through(seq)
        return seq

    async def close(self) -> None:
        """Log and send everything still pending."""
        self._delta_due = True
        self._take_delta()
        if self._ready:
            writer().notify(self)
        await self._sent_through(self.seq)

    def reserve(self, channel: str, payload: dict[str, Any]) -> Entry:
        """Number an event the caller writes itself (the run's last, with its answer);
        send it with :meth:`send_written`. Call after :meth:`close`."""
        self.seq += 1
        return (self.seq, self.run_id, channel, payload)

    def release(self, entry: Entry) -> None:
        """Give back the number of a reserved event that was never written."""
        if entry[0] == self.seq:
            self.seq -= 1

    async def send_written(self, entry: Entry) -> None:
        await self.send([entry])

    # deltas ---------------------------------------------------------------------------
    def _add_delta(self, content: str) -> None:
        if not content:
            return
        now = time.monotonic()
        burst = now - self._last_delta_at < IDLE_GAP
        self._last_delta_at = now
        self._delta += content
        wait = FRAME_INTERVAL - (now - self._last_delta_frame_at)
        if not burst or wait <= 0:
            self._mark_delta_due()
        elif self._delta_timer is None:
            self._delta_timer = asyncio.get_running_loop().call_later(wait, self._mark_delta_due)

    def _mark_delta_due(self) -> None:
        self._delta_timer = None
        self._delta_due = True
        writer().notify(self)

    def _take_delta(self) -> None:
        """The pending answer text becomes an entry (before any later event)."""
        if not self._delta:
            return
        if self._delta_timer is not None:
            self._delta_timer.cancel()
            self._delta_timer = None
        self._add("answer", {"status": "delta", "content": self._delta})
        self._delta, self._delta_due = "", False
        self._last_delta_frame_at = time.monotonic()

    # what the writer calls ------------------------------------------------------------
    def take_ready(self) -> list[Entry]:
        """Entries to write now: the events, and the answer text if its frame is due."""
        if self._delta_due:
            self._take_delta()
        ready, self._ready = self._ready, []
        return ready

    async def send(self, entries: list[Entry]) -> None:
        """Send the frames of written entries, in order (rendered against the run's view)."""
        for entry in entries:
            seq, run_id, channel, payload = entry
            message = frame(entry, self.view.apply(seq, channel, payload))
            try:
                await self.layer.group_send(self.group, message)
            except Exception:  # the event is logged: readers refill from the log
                logger.warning("could not send event %s of run %s", seq, run_id, exc_info=True)
            self.frames_sent += 1
            self._sent_seq = seq
        self._wake_waiters()

    def fail(self, error: BaseException, entries: list[Entry]) -> None:
        """``entries`` could not be written: nothing of them is sent; waiters get ``error``."""
        logger.error("run %s lost %d events: %s", self.run_id, len(entries), error)
        self.failure = error
        self._wake_waiters()

    # helpers --------------------------------------------------------------------------
    def _add(self, channel: str, payload: dict[str, Any]) -> int:
        self.seq += 1
        self._ready.append((self.seq, self.run_id, channel, payload))
        return self.seq

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise RuntimeError("the run's events could not be saved") from self.failure

    async def _sent_through(self, seq: int) -> None:
        if self._sent_seq >= seq:
            return
        self._raise_failure()
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((seq, waiter))
        await waiter

    def _wake_waiters(self) -> None:
        still = []
        for seq, waiter in self._waiters:
            if waiter.done():
                continue
            if self.failure is not None:
                waiter.set_exception(RuntimeError("the run's events could not be saved"))
            elif seq <= self._sent_seq:
                waiter.set_result(None)
            else:
                still.append((seq, waiter))
        self._waiters = still


class EventWriter:
    """Writes the ready events of every run on one event loop, then sends their frames."""

    def __init__(self) -> None:
        self._waiting: dict[int, RunPublisher] = {}
        self._task: asyncio.Task[None] | None = None

    def notify(self, publisher: RunPublisher) -> None:
        """``publisher`` has something ready (written by the current or the next round)."""
        self._waiting[id(publisher)] = publisher
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._waiting:
            publishers, self._waiting = list(self._waiting.values()), {}
            batch = [(publisher, publisher.take_ready()) for publisher in publishers]
            batch = [(publisher, entries) for publisher, entries in batch if entries]
            try:
                written = await self._write(batch) if batch else []
                for publisher, entries in written:
                    publisher.db_writes += 1
                    await publisher.send(entries)
            except Exception as error:  # no run may wait for ever on a writer that died
                logger.exception("the event writer failed")
                for publisher, entries in batch:
                    publisher.fail(error, entries)

    async def _write(
        self, batch: list[tuple[RunPublisher, list[Entry]]]
    ) -> list[tuple[RunPublisher, list[Entry]]]:
        """Write ``batch`` in one transaction, retrying; if it keeps failing, each run's
        part on its own (one run's bad row must not lose the others'). What was written."""
        for delay in (*WRITE_RETRY_DELAYS, None):
            try:
                await _in_thread(write_events)([(p.conversation_id, e) for p, e in batch])
                return batch
            except DatabaseError as error:
                if delay is None:
                    logger.warning("writing the event log failed (%s); run by run", error)
                    break
                logger.warning("writing the event log failed (%s); retrying", error)
                await asyncio.sleep(delay)
        written = []
        for publisher, entries in batch:
            try:
                await _in_thread(write_events)([(publisher.conversation_id, entries)])
            except DatabaseError as error:
                publisher.fail(error, entries)
            else:
                written.append((publisher, entries))
        return written


_writers: PerLoop[EventWriter] = PerLoop(EventWriter)


def writer() -> EventWriter:
    """The running loop's event writer."""
    return _writers.get()


def _in_thread(function):
    """``function`` on a database thread (runs must not queue behind one shared thread)."""
    return database_sync_to_async(function, thread_sensitive=False)


def write_events(batches: list[tuple[int, list[Entry]]]) -> None:
    """Insert the events of ``batches`` (conversation id, entries) in one transaction
    (the caller's, if any).

    Conflicts are ignored: a retried write whose first attempt committed (the connection
    broke before the answer arrived) must not fail on its own rows.
    """
    rows = [
        RunEvent(
            run_id=run_id,
            conversation_id=conversation_id,
            seq=seq,
            channel=channel,
            payload=payload,
        )
        for conversation_id, entries in batches
        for seq, run_id, channel, payload in entries
    ]
    with transaction.atomic(savepoint=False):
        RunEvent.objects.bulk_create(rows, ignore_conflicts=True)


# ----------------------------------------------------------------- runs nobody executes


def publish_events_sync(*, run: Run, events: list[AgentEvent]) -> None:
    """Log and send events for a run no coroutine executes any more (a sweep, a failed
    start, a Stop before the start), from sync code."""
    with transaction.atomic():
        # The conversation's row lock: no other writer numbers events meanwhile.
        list(Conversation.objects.select_for_update().filter(pk=run.conversation_id).values("pk"))
        stored = list(
            RunEvent.objects.filter(run=run)
            .order_by("seq")
            .values_list("seq", "channel", "payload")
        )
        view = build_run_view(run.pk, stored, run_inject_ids(run.pk))
        seq = last_event_seq(run.conversation_id)
        frames = []
        for event in events:
            seq += 1
            payload = event.to_dict()
            RunEvent.objects.create(
                conversation_id=run.conversation_id,
                run=run,
                seq=seq,
                channel=event.channel,
                payload=payload,
            )
            frames.append((seq, event.channel, payload))
    layer = get_channel_layer()
    if layer is None:
        return
    for seq, channel, payload in frames:
        message = frame((seq, run.pk, channel, payload), view.apply(seq, channel, payload))
        try:
            async_to_sync(layer.group_send)(conversation_group(run.conversation_id), message)
        except Exception:  # logged: readers refill from the log
            logger.warning("could not send event %s of run %s", seq, run.pk, exc_info=True)


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
