"""URLs of the JSON API, mounted under /api/ (no trailing slashes, as documented)."""

from __future__ import annotations

from django.urls import path, re_path

from conversations.api import sse, views

urlpatterns = [
    path("conversations", views.conversation_list_create, name="api_conversations"),
    path("conversations/<id:conversation_id>", views.conversation_detail, name="api_conversation"),
    path(
        "conversations/<id:conversation_id>/messages",
        views.message_create,
        name="api_conversation_messages",
    ),
    path(
        "conversations/<id:conversation_id>/events",
        sse.conversation_events,
        name="api_conversation_events",
    ),
    path("runs/<id:run_id>/cancel", views.run_cancel, name="api_run_cancel"),
    path("runs/<id:run_id>/retry", views.run_retry, name="api_run_retry"),
    path(
        "runs/<id:run_id>/approvals/<str:call_id>",
        views.run_approval,
        name="api_run_approval",
    ),
    path("messages/<id:message_id>/pin", views.message_pin, name="api_message_pin"),
    path("messages/<id:message_id>/unpin", views.message_unpin, name="api_message_unpin"),
    path("models", views.model_list, name="api_models"),
    path("tools", views.tool_list, name="api_tools"),
    path("schema", views.schema, name="api_schema"),
    re_path(r"^(?P<path>.*)$", views.not_found, name="api_not_found"),
]
