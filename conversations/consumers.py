"""Websocket consumer: pushes a conversation's rendered events to its owner.

Connect: authenticate, join the group, check ownership and catch up (one database call;
not the owner: leave the group and close), ``accept()`` last.
Catch-up re-renders every run that changed after the page's last event (``?after=N``) as
one idempotent block; live frames at or below the caught-up sequence are dropped, so a
reconnect never loses or doubles anything.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async

from conversations import selectors
from conversations.dispatch import QueuedDispatchConsumer
from conversations.publisher import conversation_group


class ConversationConsumer(QueuedDispatchConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        user_id = user.pk if user is not None and user.is_authenticated else None
        if user_id is None:
            await self.close(code=4403)
            return
        # Joined before the catch-up reads anything, left at once if not the owner.
        group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(group, self.channel_name)
        caught_up = await database_sync_to_async(selectors.socket_catch_up)(
            user_id=user_id, conversation_id=self.conversation_id, after_seq=_after(self.scope)
        )
        if caught_up is None:
            await self.channel_layer.group_discard(group, self.channel_name)
            await self.close(code=4403)
            return
        self.group = group
        frames, self.last_seq = caught_up
        await self.accept()
        for html in frames:
            await self.send(text_data=html)

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def dispatch(self, message: dict) -> None:
        """Live frames skip the base class's per-message ``close_old_connections()``.

        That call hops to Django's one sync thread for every message; for a streamed
        answer it meant one hop per frame, queued behind every sync view of the process.
        Forwarding a frame touches no database.
        """
        if message.get("type") == "run.event":
            await self.run_event(message)
            return
        await super().dispatch(message)

    async def run_event(self, message: dict) -> None:
        """A live event from the publisher: forward its pre-rendered frame once."""
        if message["seq"] <= self.last_seq:
            return
        self.last_seq = message["seq"]
        if message.get("html"):
            await self.send(text_data=message["html"])


def _after(scope) -> int:
    query = parse_qs(scope.get("query_string", b"").decode())
    try:
        return max(0, int(query.get("after", ["0"])[0]))
    except ValueError:
        return 0
