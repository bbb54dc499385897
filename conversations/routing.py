from __future__ import annotations

from django.urls import path

from conversations import consumers

websocket_urlpatterns = [
    path("ws/conversations/<int:conversation_id>/", consumers.ConversationConsumer.as_asgi()),
]
