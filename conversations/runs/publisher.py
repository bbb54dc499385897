"""Engine events -> the conversation's live frames and the event log.

An event's frame goes to the conversation's channel-layer group at once; its row in the
log (``RunEvent``) is written shortly after: one transaction per event loop every
``FLUSH_INTERVAL`` carries the events of every run on it, and the events that must be
durable before work goes on (a tool call about to run, the end of a run) are written at
once. The log is the only store of events. A reader joins the group, reads the log, and
drops live frames it already read (by number). Each frame also names the number of the
conversation's event before it (``prev``; numbers have gaps, see
:mod:`conversations.history.numbering`): a frame whose ``prev`` is past what the reader read means
events were sent before it joined and not yet written, and it waits for them to reach the
log (:func:`conversations.live.eventlog.read_through`).

Text deltas (the answer's, a step's thought) are coalesced: a run has at most one delta
frame being sent; the deltas that arrive meanwhile go out together in the next one, at
most one per frame interval while frames flow. The interval is zero while the process has
spare CPU and grows as it gets busy (:mod:`conversations.runs.pacing`): frames grow
instead of queueing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from channels.layers import get_channel_layer
from django.db import transaction
from django.utils.translation import gettext as _

from conversations.history.numbering import (
    last_event_seq,
    release_event_numbers,
    reserve_event_numbers,
)
from conversations.history.progress import RunProgress
from conversations.models import Conversation, Run, RunEvent
from conversations.runs import loops
from conversations.runs.db import DATABASE_OUTAGES, db, log_db, patiently
from conversations.runs.pacing import pacer
from core import runtime
from core.episodes import OutageLog
from engine.events import AgentEvent, AnswerDelta, ErrorEvent, IterationDone, ThoughtDelta

logger = logging.getLogger(__name__)
layer_unreachable = OutageLog("the channel layer")

Entry = tuple[int, int, str, dict[str, Any]]  # (seq, run_id, channel, payload)

# A delta arriving at least this long after the previous one is not part of a burst: it
# goes out at once (a steady 20 tokens/s stream never waits).
IDLE_GAP = 0.025
FLUSH_INTERVAL = 0.5


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


def frame(entry: Entry, prev: int, conversation_id: int, *, first: bool = False) -> dict[str, Any]:
    """The channel-layer message of an event: its fields and the number of the event before
    it (``first``: the run's first event, nothing of the run before it). Data only: the web
    server renders it (:mod:`conversations.live.frames`)."""
    seq, run_id, channel, payload = entry
    message = {
        "type": "run.event",
        "seq": seq,
        "prev": prev,
        "run_id": run_id,
        "conversation_id": conversation_id,
        "channel": channel,
        "payload": payload,
    }
    if first:
        message["first"] = True
    return message


@dataclass
class Unanswered(AgentEvent):
    """Follow-ups a Stop left unanswered: ordinary messages of the conversation now, no
    longer waiting for the run (the app's event, not the engine's: it knows no messages)."""

    messages: list[dict[str, Any]]  # {id, content, pinned}
    channel: ClassVar[str] = "unanswered"

    def to_dict(self) -> dict[str, Any]:
        return {"messages": self.messages}


def _written_at_once(channel: str, payload: dict[str, Any]) -> bool:
    """Events logged before the run goes on: the model's tool call (before the tool runs),
    how the run ended, what became of its left-over follow-ups."""
    if channel == "step":
        return payload.get("type") == "iteration" and payload.get("status") == "start"
    return channel in ("done", "error", "followup", "unanswered")


def _logged_before_sent(channel: str, payload: dict[str, Any]) -> bool:
    """An approval request: the user may answer it the moment it shows, and the answer is
    checked against the log."""
    return channel == "approval" and payload.get("status") == "requested"


class RunPublisher:
    """The events of one run (the conversation's only writer of events while it is
    active), numbered from the numbers ``reserved`` for it, and more reserved when those
    run out; ``start_seq`` is the number of the conversation's event before its first."""

    def __init__(
        self,
        *,
        run_id: int,
        conversation_id: int,
        start_seq: int,
        reserved: tuple[int, int] | None = None,
    ) -> None:
        self.run_id = run_id
        self.conversation_id = conversation_id
        self.seq = start_seq  # the last number used
        self._next, self._last = reserved or (1, 0)
        self._reserved_prev = start_seq
        self.progress = RunProgress()  # the answer so far, the tool calls not ended
        self.layer = get_channel_layer()
        self.group = conversation_group(conversation_id)
        self.frames_sent = 0
        self.db_writes = 0
        self.unwritten: list[Entry] = []
        self._pending_delta = ""
        self._pending_iteration: int | None = None  # the thought's step; None: the answer
        self._last_frame_at = 0.0
        self._last_delta_at = 0.0
        self._delta_task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def on_event(self, event: AgentEvent) -> None:
        """The engine's ``on_event`` callback."""
        if isinstance(event, AnswerDelta):
            await self._on_delta(event.content, None)
            return
        if isinstance(event, ThoughtDelta):
            await self._on_delta(event.content, event.iteration)
            return
        await self.send_pending_delta()
        await self.publish(event.channel, event.to_dict())

    async def publish(self, channel: str, payload: dict[str, Any]) -> int:
        """Send one event's frame, then log it (at once if work must not go on before)."""
        async with self._lock:
            self._last_frame_at = time.monotonic()
            prev = self.seq
            entry: Entry = (await self._number(), self.run_id, channel, payload)
            self.unwritten.append(entry)
            if _logged_before_sent(channel, payload):
                await self.flush()
            await self._send(entry, prev)
        if _written_at_once(channel, payload):
            await self.flush()
        else:
            writer().flush_soon(self)
        return entry[0]

    async def flush(self) -> None:
        """Write this run's events not yet in the log, now."""
        await writer().write([self])

    async def close(self) -> None:
        """Send the pending answer text and write every event not yet in the log (waiting
        out a short database outage: these are the run's last events)."""
        await self.drain()
        await patiently(self.flush, what=f"writing the events of run {self.run_id}")

    async def drain(self) -> None:
        """Send the answer text held back, and wait until the delta sender is done."""
        await self.send_pending_delta()
        if self._delta_task is not None and not self._delta_task.done():
            # Let the sender finish (it finds the buffer empty): cancelled mid-send it could
            # lose a frame; abandoned, it would outlive the run.
            await self._delta_task

    async def reserve(self, channel: str, payload: dict[str, Any]) -> Entry:
        """Number an event the caller writes itself (the run's last, with its answer, in
        one transaction); send it with :meth:`send_written`. Call after :meth:`close`."""
        self._reserved_prev = self.seq
        return (await self._number(), self.run_id, channel, payload)

    def release(self, entry: Entry) -> None:
        """Give back the number of a reserved event that was never written."""
        if entry[0] == self.seq:
            self._next, self.seq = self.seq, self._reserved_prev

    async def send_written(self, entry: Entry) -> None:
        await self._send(entry, self._reserved_prev)

    async def send_unsaved(self, entry: Entry, reason: str) -> None:
        """Send a reserved event that could not be written yet, marked so (``unsaved``:
        why); the log gets it unmarked once the write succeeds."""
        seq, run_id, channel, payload = entry
        await self._send(
            (seq, run_id, channel, {**payload, "unsaved": reason}), self._reserved_prev
        )

    async def release_numbers(self) -> None:
        """Give back the numbers the run reserved and did not use (after its last event),
        so the next run's follow on from its last."""
        if self._next <= self._last:
            await db(release_event_numbers)(
                self.conversation_id, used_through=self.seq, reserved_through=self._last
            )
            self._last = self.seq

    async def _number(self) -> int:
        """The next of the run's event numbers (reserving more when they ran out)."""
        if self._next > self._last:
            self._next, self._last = await db(reserve_event_numbers)(self.conversation_id)
        self.seq, self._next = self._next, self._next + 1
        return self.seq

    async def _send(self, entry: Entry, prev: int) -> None:
        seq, _run_id, channel, payload = entry
        self.progress.apply(channel, payload)
        message = frame(entry, prev, self.conversation_id, first=self.frames_sent == 0)
        try:
            await self.layer.group_send(self.group, message)
        except Exception as exc:  # the event is logged all the same: readers refill from the log
            layer_unreachable.failed(exc, doing=f"sending event {seq} of run {self.run_id}")
        else:
            layer_unreachable.recovered()
        self.frames_sent += 1

    # deltas ---------------------------------------------------------------------------
    async def _on_delta(self, content: str, iteration: int | None) -> None:
        """Hand the delta (of the answer, or of step ``iteration``'s thought) to the run's
        delta sender; the engine never waits for a send."""
        if not content:
            return
        if self._pending_delta and iteration != self._pending_iteration:
            await self.send_pending_delta()  # another stream's text: in order, not merged
        self._pending_iteration = iteration
        now = time.monotonic()
        # Quiet: the previous delta came a while ago (not the previous frame: that would
        # phase-lock a steady 20 tokens/s stream into waiting).
        quiet = now - self._last_delta_at >= IDLE_GAP
        self._last_delta_at = now
        self._pending_delta += content
        if self._delta_task is None or self._delta_task.done():
            self._delta_task = asyncio.ensure_future(self._send_deltas(at_once=quiet))

    async def _send_deltas(self, *, at_once: bool) -> None:
        """Send the held text until none is left: what arrives during a send waits for it
        and goes out in the next frame, one frame interval after the previous one."""
        if not at_once:
            await self._until_next_frame()
        while self._pending_delta:
            await self.send_pending_delta()
            if self._pending_delta:
                await self._until_next_frame()

    async def _until_next_frame(self) -> None:
        delay = self._last_frame_at + pacer().interval() - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)

    async def send_pending_delta(self) -> None:
        """Send the answer text held back, if any. Never cancels the delta sender: it may be
        inside publish() already; sending now empties the buffer, the sender finds none."""
        content, self._pending_delta = self._pending_delta, ""
        if not content:
            return
        iteration = self._pending_iteration
        merged = AnswerDelta(content) if iteration is None else ThoughtDelta(iteration, content)
        await self.publish(merged.channel, merged.to_dict())


class EventWriter:
    """Writes the unwritten events of every run on one event loop, in one transaction.

    A write per run and event would be a transaction per streamed frame: this writer
    takes every run's unwritten events every ``FLUSH_INTERVAL`` and writes them together;
    runs that need theirs durable at once call :meth:`write` themselves. Events leave a
    run's ``unwritten`` list only once their rows committed; a failed write keeps them for
    the next round (a retry of a write that did commit ignores its own rows).
    """

    def __init__(self) -> None:
        self._soon: dict[int, RunPublisher] = {}
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    def flush_soon(self, publisher: RunPublisher) -> None:
        self._soon[id(publisher)] = publisher
        if self._timer is None or self._timer.done():
            self._timer = asyncio.ensure_future(self._write_later())

    async def _write_later(self) -> None:
        await asyncio.sleep(FLUSH_INTERVAL)
        publishers, self._soon = list(self._soon.values()), {}
        try:
            await self.write(publishers)
        except Exception as exc:  # kept in the runs' lists: the next round retries
            if not isinstance(exc, DATABASE_OUTAGES):  # an outage is logged once, by db
                logger.exception("writing the event log of %d runs failed", len(publishers))
            for publisher in publishers:
                self._soon.setdefault(id(publisher), publisher)
        if self._soon:
            self._timer = asyncio.ensure_future(self._write_later())

    async def aclose(self) -> None:
        """Write what is waiting for the next round now (the process is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
        publishers, self._soon = list(self._soon.values()), {}
        await self.write(publishers)

    async def write(self, publishers: list[RunPublisher]) -> None:
        """Write the unwritten events of ``publishers`` now (one transaction, in order)."""
        async with self._lock:
            batches = [(p, list(p.unwritten)) for p in publishers if p.unwritten]
            if not batches:
                return
            await log_db(write_events)([(p.conversation_id, entries) for p, entries in batches])
            for publisher, entries in batches:
                del publisher.unwritten[: len(entries)]
                publisher.db_writes += 1


def writer() -> EventWriter:
    """The running loop's event writer (a part of the process's runtime)."""
    return runtime.part(EventWriter)


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


def publish_events_sync(
    *, run: Run, events: list[AgentEvent], check: Callable[[], bool] | None = None
) -> bool:
    """Log and send events for a run no coroutine executes any more (a sweep, a failed
    start, a Stop before the start, a new title after its answer), from sync code.

    ``check`` is called first, in the transaction and under the conversation's row lock
    (what it writes commits with the events): False publishes nothing. Whether they were
    published."""
    with transaction.atomic():
        # The conversation's row lock: no other writer numbers events meanwhile.
        list(Conversation.objects.select_for_update().filter(pk=run.conversation_id).values("pk"))
        if check is not None and not check():
            return False
        # Numbered after every number handed out, the dead run's unwritten ones included:
        # readers that saw those take these as newer.
        prev = last_event_seq(run.conversation_id)
        seq, _last = reserve_event_numbers(run.conversation_id, len(events))
        frames = []
        for event in events:
            payload = event.to_dict()
            RunEvent.objects.create(
                conversation_id=run.conversation_id,
                run=run,
                seq=seq,
                channel=event.channel,
                payload=payload,
            )
            frames.append((seq, prev, event.channel, payload))
            prev, seq = seq, seq + 1
    layer = get_channel_layer()
    if layer is None:
        return True
    for seq, prev, channel, payload in frames:
        message = frame((seq, run.pk, channel, payload), prev, run.conversation_id)
        try:
            loops.call(layer.group_send, conversation_group(run.conversation_id), message)
        except Exception as exc:  # logged: readers refill from the log
            layer_unreachable.failed(exc, doing=f"sending event {seq} of run {run.pk}")
        else:
            layer_unreachable.recovered()
    return True


def logged_progress(run_id: int) -> RunProgress:
    """What a run's log shows of it: the answer text that reached the log, its tool calls
    begun and not ended."""
    stored = (
        RunEvent.objects.filter(run_id=run_id).order_by("seq").values_list("channel", "payload")
    )
    return RunProgress.replay(stored)


def publish_interrupted(
    *, run_id: int, progress: RunProgress, after: Sequence[AgentEvent] = ()
) -> None:
    """Close an interrupted run's open tool calls and report it as failed, keeping the
    answer text of its ``progress``; then the ``after`` events."""
    run = Run.objects.get(pk=run_id)
    events: list[AgentEvent] = [
        IterationDone(iteration, tool_name, "[interrupted]", "interrupted", 0.0)
        for iteration, tool_name in progress.unfinished_calls()
    ]
    events.append(
        ErrorEvent(run.error or _("The run was interrupted."), "failed", progress.answer_text)
    )
    publish_events_sync(run=run, events=[*events, *after])
