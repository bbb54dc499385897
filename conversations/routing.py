from __future__ import annotations

from django.urls import path, re_path

from conversations.live import consumers

websocket_urlpatterns = [
    path("ws/conversations/<id:conversation_id>/", consumers.ConversationConsumer.as_asgi()),
    re_path(r"", consumers.UnknownPathConsumer.as_asgi()),
]
