"""What the fault tests watch and check: a conversation's SSE stream read the way an API
client reads it (resuming with Last-Event-ID after a drop), and the invariants issue 27
names, checked against the database."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from typing import Any

import httpx

from tests.integration.stack import Browser, Stack, stop_reading

Event = tuple[int, str, dict[str, Any]]
TERMINAL = ("done", "error")


class EventStream:
    """The conversation's SSE stream (``follow``), read in the background.

    A dropped connection is resumed with ``Last-Event-ID`` on the browser's current
    server (:meth:`move_to` switches servers), as an EventSource does; ``drops`` counts
    the resumptions. ``events`` is everything received, in order.
    """

    def __init__(self, browser: Browser, conversation_id: int, *, after: int = 0) -> None:
        self.browser = browser
        self.path = f"/api/conversations/{conversation_id}/events?follow=1"
        self.events: list[Event] = []
        self.after = after
        self.drops = 0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> EventStream:
        self._task = asyncio.ensure_future(self._read_resuming())
        return self

    async def __aexit__(self, *exc: object) -> None:
        await stop_reading(self._task)

    def move_to(self, browser: Browser) -> None:
        """Resume on another server after the next drop (its connection is the next one)."""
        self.browser = browser

    async def _read_resuming(self) -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, OSError):
                await self._read()
            self.drops += 1
            await asyncio.sleep(0.2)  # an EventSource waits before it reconnects too

    async def _read(self) -> None:
        last = self.events[-1][0] if self.events else self.after
        headers = {"Last-Event-ID": str(last)}
        http = self.browser.http
        async with http.stream("GET", self.path, headers=headers, timeout=None) as response:
            if response.status_code != 200:
                return
            fields: dict[str, str] = {}
            async for line in response.aiter_lines():
                if line:
                    name, _, value = line.partition(": ")
                    fields[name] = value
                elif "id" in fields:
                    event = (int(fields["id"]), fields["event"], json.loads(fields["data"]))
                    self.events.append(event)
                    fields = {}

    def runs(self) -> list[list[Event]]:
        """The events split at each run's end (done or error), the last one maybe open;
        ``saved`` events (a shown end reached the log) left out."""
        runs: list[list[Event]] = [[]]
        for event in self.events:
            if event[1] == "saved":  # an end shown before it was written is written now
                continue
            runs[-1].append(event)
            if event[1] in TERMINAL:
                runs.append([])
        return [run for run in runs if run]

    def ended(self, count: int = 1) -> bool:
        return sum(1 for e in self.events if e[1] in TERMINAL) >= count

    def answer(self) -> str:
        """The text the latest run's answer deltas assembled."""
        runs = self.runs()
        return assembled(runs[-1]) if runs else ""


def assembled(events: list[Event]) -> str:
    return "".join(p.get("content", "") for _i, e, p in events if e == "answer" and "content" in p)


def final_answer(events: list[Event]) -> tuple[str, bool]:
    """What a client shows once a run ended: the done event's answer, or an error's kept
    partial answer (which supersedes the deltas), and whether it is complete."""
    _seq, channel, payload = events[-1]
    if channel == "done":
        return payload["answer"], payload.get("status", "succeeded") == "succeeded"
    assert channel == "error", events[-1]
    shown = assembled(events)
    kept = payload.get("answer", "")
    assert shown.startswith(kept), (shown, kept)  # the kept part is a prefix of what showed
    return kept, False


def assert_consistent(stack: Stack, conversation_id: int, sent: list[str], stream: EventStream):
    """Issue 27's invariants for one conversation on a team stack's database:

    - the user messages stored are the ones sent, in order;
    - event numbers only increased, none seen twice;
    - no run is left queued or running;
    - each run's answer as the client ends up showing it equals the stored answer, and
      the stored one is marked incomplete exactly when the run did not complete.
    """
    ids = [seq for seq, _e, _p in stream.events]
    assert ids == sorted(set(ids)), f"event numbers must only increase: {ids}"
    stored_messages = [
        content
        for (content,) in stack.query(
            "SELECT content FROM conversations_message "
            "WHERE conversation_id = %s AND role = 'user' ORDER BY seq",
            conversation_id,
        )
    ]
    assert stored_messages == sent
    runs = stack.query(
        "SELECT r.id, r.status, m.content, m.incomplete FROM conversations_run r "
        "LEFT JOIN conversations_message m ON m.run_id = r.id AND m.role = 'assistant' "
        "WHERE r.conversation_id = %s ORDER BY r.id",
        conversation_id,
    )
    assert all(status not in ("queued", "running") for _id, status, _c, _i in runs), runs
    client_runs = stream.runs()
    assert len(client_runs) == len(runs), (len(client_runs), runs)
    for events, (_run_id, status, content, incomplete) in zip(client_runs, runs, strict=True):
        shown, complete = final_answer(events)
        assert shown == (content or ""), (status, shown, content)
        assert complete == (status == "succeeded") and bool(incomplete) == (
            not complete and bool(content)
        ), (status, complete, incomplete)


def shown_answer(frame: str, run_id: int) -> str | None:
    """The finished answer a frame puts on the page (its rendered paragraph): in the live
    finish frame or in a catch-up's re-render of the ended run; None in other frames."""
    match = re.search(
        rf'<div id="answer-{run_id}" class="answer msg assistant"[^>]*>'
        r'\s*<div class="answer-body"><p>(.*?)</p>',
        frame,
        re.S,
    )
    return match[1] if match else None
