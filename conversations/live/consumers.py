"""Websocket consumer: pushes a conversation's events, rendered here, to its owner.

Connect: authenticate, join the group, check ownership (not the owner: leave the group
and close), ``accept()``, then catch up from the log. The catch-up re-renders every
run with events after the page's last one (``?after=N``) as one idempotent block; live
frames numbered at or below what was caught up are dropped. A live frame numbered past
it means events were sent before the socket joined and not yet logged: once they are, the
runs are caught up again (:func:`conversations.live.eventlog.read_through`); and the log is
read once more shortly after a connect while a run is active, for such events when no
frame follows them. A reconnect never loses or doubles anything, and a socket leaves no
subscription behind, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from django.utils import translation

from conversations import selectors
from conversations.live.eventlog import (
    REREAD_AFTER,
    LiveSubscription,
    keep_listening,
    read_through,
)
from conversations.live.frames import LiveFrames
from conversations.pages import timeline
from conversations.preferences import socket_language
from conversations.runs.db import db
from conversations.runs.publisher import conversation_group
from core import logcontext, runtime
from core.converters import DB_ID_MAX
from core.graceful import RESTART_CLOSE_CODE, OpenClients
from core.metrics import CLIENTS_OPEN

logger = logging.getLogger(__name__)


class ConversationConsumer(AsyncWebsocketConsumer):
    """One socket of a chat page.

    The socket's place in the conversation's live group is its own
    (:class:`LiveSubscription`, read by its own task), not the channel channels gives
    each consumer: channels can end a consumer with the last receive of that channel
    already finished, and channels_redis then never unsubscribes it (channels_redis#276;
    50 sockets closing during a run left about 30 subscriptions for the life of the
    server). A layer alias that is not configured gives a consumer no channel
    (``get_channel_layer`` returns None for it).
    """

    channel_layer_alias = "agentsite.no-consumer-channel"
    subscription: LiveSubscription | None = None
    forwarding: asyncio.Task[None] | None = None
    language = "en"  # the frames' language (socket_language), known once connected
    receiving: asyncio.Future[dict[str, Any]] | None = None  # the forwarder's receive
    counted = False  # among the open clients of the metrics (accepted, not yet left)
    open_key: int | None = None  # among the server's open clients (core/graceful.py)

    async def __call__(self, scope, receive, send) -> None:
        """The consumer, then its place in the group given back, whichever way it ended
        (a disconnect, a handler that raised, the server cancelling it)."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._leave()

    async def connect(self) -> None:
        user = self.scope.get("user")
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        # The log context of the connection's task (core/logcontext.py).
        logcontext.bind(conversation_id=self.conversation_id, user_id=getattr(user, "pk", None))
        if user is None or not user.is_authenticated:
            await self.close(code=4403)
            return
        layer = get_channel_layer()
        await keep_listening(layer)
        # Joined before the catch-up reads the log, left at once if not the owner.
        self.subscription = await LiveSubscription.join(
            layer, conversation_group(self.conversation_id)
        )
        owned = await db(selectors.conversation_owned)(
            user_id=user.pk, conversation_id=self.conversation_id
        )
        if not owned:
            await self._leave()
            await self.close(code=4403)
            return
        # Accepted before the catch-up renders: the handshake never waits on it (daphne
        # drops a handshake not answered within its connect timeout, 5 s by default, which
        # 50 pages reconnecting to a long run at once reached).
        await self.accept()
        CLIENTS_OPEN.labels("websocket").inc()
        self.counted = True
        clients = runtime.part_or_none(OpenClients)
        if clients is not None:  # a restart closes the socket: the page comes back
            self.open_key = clients.add(self._close_for_restart)
        self.language = await db(socket_language)(self.scope)
        try:
            with translation.override(self.language):
                frames, self.last_seq, running = await db(timeline.socket_catch_up)(
                    conversation_id=self.conversation_id, after_seq=_after(self.scope)
                )
        except Exception:
            logger.warning("conversation %s: catch-up failed", self.conversation_id, exc_info=True)
            await self.close(code=1011)  # the page reconnects and catches up
            return
        for html in frames:
            await self.send(text_data=html)
        self.forwarding = asyncio.ensure_future(self._forward(reread=running))

    async def disconnect(self, code: int) -> None:
        await self._leave()

    async def _leave(self) -> None:
        """Stop forwarding and give the socket's place in the group back (once)."""
        subscription, self.subscription = self.subscription, None
        if self.counted:
            self.counted = False
            CLIENTS_OPEN.labels("websocket").dec()
        if self.open_key is not None:
            key, self.open_key = self.open_key, None
            clients = runtime.part_or_none(OpenClients)
            if clients is not None:
                clients.discard(key)
        if self.forwarding is not None:
            self.forwarding.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.forwarding
        if subscription is not None:
            await subscription.leave(self.receiving)

    async def _close_for_restart(self) -> None:
        """The server is stopping: :data:`~core.graceful.RESTART_CLOSE_CODE` (4012: 1012,
        service restart, in the private range daphne can send) tells the page's socket to
        reconnect, to another server, and catch up from what it has (``?after=``)."""
        await self.close(code=RESTART_CLOSE_CODE)

    async def _forward(self, *, reread: bool) -> None:
        """Forward the group's live frames, in order. While a run is active, the log is
        read once more ``REREAD_AFTER`` the connect, for events sent before the join that
        no frame follows (the run waits on a tool). A failure closes the socket: the page
        reconnects and catches up."""
        assert self.subscription is not None
        layer, channel = self.subscription.layer, self.subscription.channel
        reread_at = time.monotonic() + REREAD_AFTER if reread else None
        try:
            while True:
                self.receiving = asyncio.ensure_future(layer.receive(channel))
                while not self.receiving.done():
                    wait = None if reread_at is None else max(0.0, reread_at - time.monotonic())
                    await asyncio.wait({self.receiving}, timeout=wait)
                    if reread_at is not None and time.monotonic() >= reread_at:
                        reread_at = None
                        await self._catch_up(through=self.last_seq)
                message = self.receiving.result()
                if message.get("type") == "run.event":
                    await self.run_event(message)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("conversation %s: socket closed after a failure", self.conversation_id)
            await self.close(code=1011)

    async def run_event(self, message: dict) -> None:
        """A live event from the publisher: render it (once per server) and forward its
        frame once."""
        seq = message["seq"]
        prev = message.get("prev", seq - 1)  # the event before it (numbers have gaps)
        if prev > self.last_seq:  # sent before this socket joined: catch up first
            await self._catch_up(through=prev)
        if seq <= self.last_seq:
            return
        self.last_seq = seq
        with translation.override(self.language):
            html = await runtime.part(LiveFrames).html(message)
        if html:
            await self.send(text_data=html)

    async def _catch_up(self, *, through: int) -> None:
        """Re-render the runs with logged events after the last frame sent, once the log
        holds ``through``."""
        if through > self.last_seq:
            await read_through(self.conversation_id, self.last_seq, through)
        with translation.override(self.language):
            frames, self.last_seq = await db(timeline.catch_up_frames)(
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
