"""URLs of the JSON API, mounted under /api/ (no trailing slashes, as documented)."""

from __future__ import annotations

from django.urls import path, re_path

from conversations import api

urlpatterns = [
    path("conversations", api.conversation_list_create, name="api_conversations"),
    path("conversations/<int:conversation_id>", api.conversation_detail, name="api_conversation"),
    path(
        "conversations/<int:conversation_id>/messages",
        api.message_create,
        name="api_conversation_messages",
    ),
    path(
        "conversations/<int:conversation_id>/events",
        api.conversation_events,
        name="api_conversation_events",
    ),
    path("runs/<int:run_id>/cancel", api.run_cancel, name="api_run_cancel"),
    path("messages/<int:message_id>/pin", api.message_pin, name="api_message_pin"),
    path("messages/<int:message_id>/unpin", api.message_unpin, name="api_message_unpin"),
    path("models", api.model_list, name="api_models"),
    path("tools", api.tool_list, name="api_tools"),
    path("schema", api.schema, name="api_schema"),
    re_path(r"^(?P<path>.*)$", api.not_found, name="api_not_found"),
]
