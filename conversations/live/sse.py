"""The conversation's events as Server-Sent Events (DESIGN.md section 4).

The stream joins the conversation's group, then replays the log after the client's last
event id, then forwards live frames: live frames already replayed are dropped by number,
and events sent before the join but not yet logged are waited for in the log
(:func:`conversations.live.eventlog.read_through`), so nothing is missed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from conversations import selectors
from conversations.history.numbering import last_event_seq
from conversations.history.tree import RunTree
from conversations.http.params import whole_number
from conversations.live.eventlog import (
    REREAD_AFTER,
    LiveSubscription,
    clean_up_soon,
    keep_listening,
    read_through,
)
from conversations.models import Run, RunEvent
from conversations.runs.db import DATABASE_OUTAGES, db
from conversations.runs.publisher import Entry, conversation_group
from core import runtime
from core.graceful import OpenClients
from core.metrics import CLIENTS_OPEN

logger = logging.getLogger(__name__)

TERMINAL_CHANNELS = frozenset({"done", "error"})
HEARTBEAT_FRAME = b": heartbeat\n\n"


def heartbeat_interval() -> float:
    return float(settings.AGENTSITE_SSE_HEARTBEAT)


def _start_after(request: HttpRequest) -> int | None:
    """The sequence number to resume after: Last-Event-ID, else ?after=N, else None."""
    for name, raw in (
        ("Last-Event-ID", request.headers.get("Last-Event-ID")),
        ("after", request.GET.get("after")),
    ):
        if raw is None or raw.strip() == "":
            continue
        return whole_number(raw, name=name, default=0)  # 0..2**63-1, else 400
    return None


def default_start(conversation_id: int) -> int:
    """Where a stream without Last-Event-ID starts: just before the latest run's first event.

    A run without events yet (queued a moment ago by the client now opening the stream)
    is the latest run too: the stream then starts after everything so far. The
    high-water mark is read *before* looking for the run's events, so an event published
    in between is never skipped.
    """
    high = last_event_seq(conversation_id)
    latest = (
        Run.objects.filter(conversation_id=conversation_id)
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)
        .first()
    )
    if latest is None:
        return high
    first = RunEvent.objects.filter(run_id=latest).order_by("seq").values_list("seq", flat=True)
    first_seq = first.first()
    return first_seq - 1 if first_seq is not None else high


def _ends_run(event: str, payload: dict[str, Any]) -> bool:
    """Whether ``event`` is its run's last: the run's end, stored; an end sent before it
    could be stored (``unsaved``) is followed by a ``saved`` event, which is then."""
    if event == "saved":
        return True
    return event in TERMINAL_CHANNELS and not payload.get("unsaved")


def _other_run_active(conversation_id: int, run_id: int | None) -> bool:
    """Whether a run other than ``run_id`` is queued or running (more events will come)."""
    qs = Run.objects.filter(conversation_id=conversation_id, status__in=Run.ACTIVE_STATUSES)
    if run_id is not None:
        qs = qs.exclude(pk=run_id)
    return qs.exists()


def _more_expected(conversation_id: int, replay: list[Entry]) -> bool:
    """Whether a stream without ``follow`` should wait for live events after its replay."""
    if replay and replay[-1][2] not in TERMINAL_CHANNELS:
        return True  # joined mid-run
    return _other_run_active(conversation_id, replay[-1][1] if replay else None)


def sse_frame(seq: int, channel: str, payload: Any, branch: dict | None = None) -> bytes:
    if branch is not None and isinstance(payload, dict):
        payload = {**payload, "branch": branch}
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return f"id: {seq}\nevent: {channel}\ndata: {data}\n\n".encode()


class BranchLabels:
    """Which branch an event belongs to: its run, and the run that run continues (the
    conversation's tree, :mod:`conversations.history.tree`), read again when a new run appears."""

    def __init__(self, conversation_id: int) -> None:
        self.conversation_id = conversation_id
        self.parents: dict[int, int | None] = {}

    async def label(self, run_id: int) -> dict[str, int | None]:
        if run_id not in self.parents:
            self.parents = await db(_run_parents)(self.conversation_id)
        return {"run_id": run_id, "parent_run_id": self.parents.get(run_id)}


def _run_parents(conversation_id: int) -> dict[int, int | None]:
    return dict(Run.objects.filter(conversation_id=conversation_id).values_list("pk", "parent_id"))


def _selected_branch_runs(conversation_id: int) -> set[int]:
    return {node.run_id for node in RunTree.load(conversation_id).selected_path()}


# A group nobody joins: sending to it tells whether the channel layer answers.
REACHABILITY_GROUP = "agentsite.reachability"


async def check_live_events() -> None:
    """Raise if the channel layer does not answer, before a stream's response starts (an
    outage answers 503 instead of a stream that breaks at once). Nothing is subscribed
    yet: a client that leaves before the stream begins leaves nothing to give back."""
    layer = get_channel_layer()
    await keep_listening(layer)
    await layer.group_send(REACHABILITY_GROUP, {"type": "reachability.check"})


async def join_live_events(conversation_id: int) -> LiveSubscription:
    """A new channel in the conversation's group."""
    return await LiveSubscription.join(get_channel_layer(), conversation_group(conversation_id))


class LiveEvents:
    """The body of an event stream: :func:`event_stream`'s generator, closed when Django
    closes the response. Django stops iterating a streaming body by closing its own
    wrapper around it, which leaves the generator suspended (and its place in the live
    group held) until the garbage collector finds it; the response's close, which Django
    calls from a thread, closes it on the loop now."""

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        self.events = events
        self.loop = asyncio.get_running_loop()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self.events

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self._close)

    def _close(self) -> None:
        clean_up_soon(self.events.aclose())


async def event_stream(
    conversation_id: int, after: int, *, follow: bool, all_branches: bool = False
) -> AsyncIterator[bytes]:
    """Join the conversation's live group, replay events after ``after`` from the log (of
    the branch the user is on, unless ``all_branches``) and follow the live group. Every
    event says which run and branch it belongs to. Once joined, the generator gives its
    place in the group back however it ends (run out, or closed when the client left).

    The group is joined *before* reading the log, so an event is in the replay, arrives live,
    or (sent before the join, not yet written) shows as a gap in the live ids, filled
    from the log once it is written; live ones at or below the last sent id are dropped.
    A frame the layer dropped (a full or expired channel) is filled the same way, or at
    the next idle heartbeat tick. Ends after a terminal event when no other run is
    pending, unless ``follow``; ends early when the database becomes unreachable, or when
    the server stops for a restart (the client reconnects with ``Last-Event-ID``).
    """
    subscription = await join_live_events(conversation_id)
    layer, channel = subscription.layer, subscription.channel
    labels = BranchLabels(conversation_id)
    last = after
    # One receive waiting at a time, for the stream's whole life: a receive cancelled at
    # every heartbeat would unsubscribe and subscribe again each time (how channels_redis
    # learns a channel is gone), dropping what arrived in between.
    receiving = asyncio.ensure_future(layer.receive(channel))
    CLIENTS_OPEN.labels("sse").inc()
    restart = asyncio.Event()
    restarting = asyncio.ensure_future(restart.wait())
    clients = runtime.part_or_none(OpenClients)
    open_key = clients.add(_ending(restart)) if clients is not None else None
    try:
        replay = await logged_after(conversation_id, after, all_branches=all_branches)
        for seq, run_id, event, payload in replay:
            yield sse_frame(seq, event, payload, await labels.label(run_id))
            last = seq
        left = None if follow else await events_left(conversation_id, replay, last, all_branches)
        if left is not None:
            for seq, run_id, event, payload in left:
                yield sse_frame(seq, event, payload, await labels.label(run_id))
            return
        # The first wait is short: what was sent before the join is written by then.
        interval = min(REREAD_AFTER, heartbeat_interval())
        while True:
            await asyncio.wait(
                {receiving, restarting}, timeout=interval, return_when=asyncio.FIRST_COMPLETED
            )
            if restart.is_set():  # ended cleanly: the client resumes after its last id
                return
            if not receiving.done():
                interval = heartbeat_interval()
                entries = await db(selectors.events_after)(conversation_id, last)
                if not entries:
                    yield HEARTBEAT_FRAME
                    continue
            else:
                message = receiving.result()
                receiving = asyncio.ensure_future(layer.receive(channel))
                if message.get("type") != "run.event" or message["seq"] <= last:
                    continue
                live = (message["seq"], message["run_id"], message["channel"], message["payload"])
                entries = [live]
                prev = message.get("prev", live[0] - 1)  # the event before it (gaps occur)
                if prev > last:
                    logged = await read_through(conversation_id, last, prev)
                    entries = [entry for entry in logged if entry[0] < live[0]] + [live]
            for seq, run_id, event, payload in entries:
                if seq <= last:
                    continue
                yield sse_frame(seq, event, payload, await labels.label(run_id))
                last = seq
                if (
                    not follow
                    and _ends_run(event, payload)
                    and not await db(_other_run_active)(conversation_id, run_id)
                ):
                    return
    except DATABASE_OUTAGES:
        # Ended cleanly: the client reconnects with Last-Event-ID (and gets a 503 while
        # the database is away), instead of a response that never ends.
        logger.warning(
            "event stream of conversation %s ended: database unreachable", conversation_id
        )
    finally:
        CLIENTS_OPEN.labels("sse").dec()
        restarting.cancel()
        if clients is not None:
            clients.discard(open_key)
        await subscription.leave(receiving)


async def events_left(
    conversation_id: int, replay: list[Entry], last: int, all_branches: bool
) -> list[Entry] | None:
    """For a stream without ``follow``, after its replay: None while more events are
    expected (a run is active, or the replay ended mid-run); else the last events to send
    before it ends. No run is active then, so every event is in the log: a run that ended
    between the replay's read and this check wrote its events after that read."""
    if await db(_more_expected)(conversation_id, replay):
        return None
    return await logged_after(conversation_id, last, all_branches=all_branches)


async def logged_after(conversation_id: int, after: int, *, all_branches: bool) -> list[Entry]:
    """The log's events after ``after``: of the branch the user is on, unless
    ``all_branches``."""
    entries = await db(selectors.events_after)(conversation_id, after)
    if not all_branches and entries:
        branch = await db(_selected_branch_runs)(conversation_id)
        entries = [entry for entry in entries if entry[1] in branch]
    return entries


def _ending(restart: asyncio.Event) -> Any:
    """How a restart ends a stream: its generator returns at its next wait."""

    async def end() -> None:
        restart.set()

    return end


async def conversation_events(request: HttpRequest, conversation_id: int) -> HttpResponse:
    """``text/event-stream`` of the conversation's events (DESIGN.md section 4), for the
    API's operation (:mod:`conversations.api.routes_conversations`), which let the request
    in and answers its errors."""
    await db(selectors.conversation_get)(user=request.user, conversation_id=conversation_id)
    after = _start_after(request)
    if after is None:
        after = await db(default_start)(conversation_id)
    follow = request.GET.get("follow", "") in ("1", "true", "yes")
    all_branches = request.GET.get("branch", "") == "all"
    # The middleware read the session and the user on this request's own thread, whose
    # connection Django gives back only when the response closes: a stream open for hours
    # would pin it (a pool of 28 served at most that many streams). Given back now; the
    # stream reads on the database threads.
    await sync_to_async(close_old_connections)()
    await check_live_events()
    events = event_stream(conversation_id, after, follow=follow, all_branches=all_branches)
    response = StreamingHttpResponse(LiveEvents(events), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
