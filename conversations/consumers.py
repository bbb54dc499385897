"""Websocket consumer: pushes a conversation's rendered events to its owner."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from conversations import selectors


def conversation_group(conversation_id: int) -> str:
    return f"conversation.{conversation_id}"


class ConversationConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        self.conversation_id = int(self.scope["url_route"]["kwargs"]["conversation_id"])
        user_id = user.pk if user is not None and user.is_authenticated else None
        allowed = await database_sync_to_async(selectors.conversation_owned_by)(
            user_id=user_id, conversation_id=self.conversation_id
        )
        if not allowed:
            await self.close(code=4403)
            return
        self.group = conversation_group(self.conversation_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
