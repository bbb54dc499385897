"""Websocket consumer: pushes a conversation's rendered events to its owner.

Connect: authenticate, join the group, check ownership and catch up from the log (not
the owner: leave the group and close), ``accept()`` last. The catch-up re-renders every
run with events after the page's last one (``?after=N``) as one idempotent block; live
frames numbered at or below what was caught up are dropped. A live frame numbered past
it means events were sent before the socket joined and not yet logged: once they are, the
runs are caught up again (:func:`conversations.history.eventlog.read_through`); and the log is
read once more shortly after a connect while a run is active, for such events when no
frame follows them. A reconnect never loses or doubles anything.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer

from agentsite.converters import DB_ID_MAX
from conversations import selectors
from conversations.history.eventlog import REREAD_AFTER, keep_listening, read_through
from conversations.runs.db import db
from conversations.runs.publisher import conversation_group


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        if user is None or not user.is_authenticated:
            await self.close(code=4403)
            return
        await keep_listening(self.channel_layer)
        # Joined before the catch-up reads the log, left at once if not the owner.
        group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(group, self.channel_name)
        # Not on channels' one shared sync thread: each live frame of every socket passes
        # through it (the consumer's per-message connection check).
        caught_up = await db(selectors.socket_catch_up)(
            user_id=user.pk, conversation_id=self.conversation_id, after_seq=_after(self.scope)
        )
        if caught_up is None:
            await self.channel_layer.group_discard(group, self.channel_name)
            await self.close(code=4403)
            return
        self.group = group
        frames, self.last_seq, running = caught_up
        await self.accept()
        for html in frames:
            await self.send(text_data=html)
        self.reread = asyncio.ensure_future(self._reread_later()) if running else None

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            if self.reread is not None:
                self.reread.cancel()
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def _reread_later(self) -> None:
        """Queue a re-read of the log behind the frames that arrive meanwhile."""
        await asyncio.sleep(REREAD_AFTER)
        await self.channel_layer.send(self.channel_name, {"type": "log.reread"})

    async def log_reread(self, message: dict) -> None:
        await self._catch_up(through=self.last_seq)

    async def dispatch(self, message: dict) -> None:
        """Live frames go straight to their handler: channels' ``dispatch`` first closes
        stale database connections on its one shared sync thread, a thread hop per frame
        for a handler that touches no database."""
        if message.get("type") == "run.event":
            await self.run_event(message)
            return
        await super().dispatch(message)

    async def run_event(self, message: dict) -> None:
        """A live event from the publisher: forward its rendered frame once."""
        seq = message["seq"]
        prev = message.get("prev", seq - 1)  # the event before it (numbers have gaps)
        if prev > self.last_seq:  # sent before this socket joined: catch up first
            await self._catch_up(through=prev)
        if seq <= self.last_seq:
            return
        self.last_seq = seq
        if message.get("html"):
            await self.send(text_data=message["html"])

    async def _catch_up(self, *, through: int) -> None:
        """Re-render the runs with logged events after the last frame sent, once the log
        holds ``through``."""
        if through > self.last_seq:
            await read_through(self.conversation_id, self.last_seq, through)
        frames, self.last_seq = await db(selectors.catch_up_frames)(
            conversation_id=self.conversation_id, after_seq=self.last_seq
        )
        for html in frames:
            await self.send(text_data=html)


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Any other websocket path (or an id no row can have): refused at the handshake,
    instead of the router's "no route" exception."""

    async def connect(self) -> None:
        await self.close(code=4404)


def _after(scope) -> int:
    """The page's last event id (``?after=N``); anything unusable means from the start."""
    query = parse_qs(scope.get("query_string", b"").decode(errors="replace"))
    try:
        after = int(query.get("after", ["0"])[0])
    except ValueError:
        return 0
    return after if 0 <= after <= DB_ID_MAX else 0
