"""Websocket consumer: pushes a conversation's rendered events to its owner.

Connect: authenticate, join the group, check ownership and catch up from the log (not
the owner: leave the group and close), ``accept()`` last. The catch-up re-renders every
run with events after the page's last one (``?after=N``) as one idempotent block; live
frames numbered at or below what was caught up are dropped, so a reconnect never loses
or doubles anything (events are logged before their frames are sent).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from conversations import selectors
from conversations.runs.publisher import conversation_group


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        if user is None or not user.is_authenticated:
            await self.close(code=4403)
            return
        # Joined before the catch-up reads the log, left at once if not the owner.
        group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(group, self.channel_name)
        # Not on channels' one shared sync thread: each live frame of every socket passes
        # through it (the consumer's per-message connection check).
        caught_up = await database_sync_to_async(selectors.socket_catch_up, thread_sensitive=False)(
            user_id=user.pk, conversation_id=self.conversation_id, after_seq=_after(self.scope)
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

    async def run_event(self, message: dict) -> None:
        """A live event from the publisher: forward its rendered frame once."""
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
