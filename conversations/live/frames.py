"""Live events -> the HTML frames a chat page swaps in, rendered by the web server.

The process executing a run sends its events as data (:mod:`conversations.runs.publisher`).
Each web server keeps the render state (:class:`~conversations.pages.rendering.RunView`)
of the runs its sockets show, advanced once per event however many sockets show the run:
the first socket to receive an event renders it, the others get the same frame. A server
that sees a run's event without the one before it (its first socket joined mid-run)
builds the state from the log through that event first.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from conversations.live.eventlog import read_through
from conversations.pages.rendering import RunView
from conversations.pages.timeline import READS_ROWS, live_run_view, read_run_rows
from conversations.runs.db import db

__all__ = ["LiveFrames"]

# Runs whose render state a server keeps (the least recently shown go first), finished
# runs kept (for the events that may follow an end: a follow-up's run, a "saved"), and the
# frames kept per run for the sockets that receive an event after the first.
KEPT_RUNS = 512
KEPT_FINISHED = 16
KEPT_FRAMES = 16
ENDS = frozenset({"done", "error"})


@dataclass
class _Shown:
    view: RunView | None = None
    through: int = -1  # the conversation's last event number the view reflects
    frames: OrderedDict[int, str] = field(default_factory=OrderedDict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class LiveFrames:
    """The render state of the runs a web server shows (a part of its runtime)."""

    def __init__(self) -> None:
        self._runs: OrderedDict[int, _Shown] = OrderedDict()
        self._finished: OrderedDict[int, None] = OrderedDict()

    async def html(self, message: dict[str, Any]) -> str:
        """The HTML frame of a live event (``run.event`` message); "" if nothing shows."""
        run_id, seq = message["run_id"], message["seq"]
        prev = message.get("prev", seq - 1)
        shown = self._shown(run_id)
        async with shown.lock:
            if (kept := shown.frames.get(seq)) is not None:
                return kept
            if seq <= shown.through:  # older than the state and no longer kept
                view = await self._view_through(message["conversation_id"], run_id, prev)
                return await self._render(view, message)
            if message.get("first") and shown.view is None:
                shown.view = RunView(run_id=run_id)  # nothing of the run to read
            elif shown.view is None or prev != shown.through:
                shown.view = await self._view_through(message["conversation_id"], run_id, prev)
            html = await self._render(shown.view, message)
            shown.through = seq
            shown.frames[seq] = html
            if len(shown.frames) > KEPT_FRAMES:
                shown.frames.popitem(last=False)
        if message["channel"] in ENDS and not message["payload"].get("unsaved"):
            self._finish(run_id)
        return html

    def _finish(self, run_id: int) -> None:
        """Keep a finished run's state a little while (events may follow its end)."""
        self._finished[run_id] = None
        if len(self._finished) > KEPT_FINISHED:
            oldest, _ = self._finished.popitem(last=False)
            self._runs.pop(oldest, None)

    def _shown(self, run_id: int) -> _Shown:
        shown = self._runs.get(run_id)
        if shown is None:
            shown = self._runs[run_id] = _Shown()
            if len(self._runs) > KEPT_RUNS:
                oldest, _ = self._runs.popitem(last=False)
                self._finished.pop(oldest, None)
        else:
            self._runs.move_to_end(run_id)
        return shown

    @staticmethod
    async def _view_through(conversation_id: int, run_id: int, prev: int) -> RunView:
        if prev > 0:  # sent before this server saw it, maybe not written yet
            await read_through(conversation_id, prev - 1, prev)
        return await db(live_run_view)(run_id, prev)

    @staticmethod
    async def _render(view: RunView, message: dict[str, Any]) -> str:
        seq, channel, payload = message["seq"], message["channel"], message["payload"]
        if channel in READS_ROWS:  # a copy: the view keeps (and may change) an end's payload
            return await db(_apply_with_rows)(view, seq, channel, dict(payload))
        return view.apply(seq, channel, payload)


def _apply_with_rows(view: RunView, seq: int, channel: str, payload: dict[str, Any]) -> str:
    read_run_rows(view, channel)
    return view.apply(seq, channel, payload)
