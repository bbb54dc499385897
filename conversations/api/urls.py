"""URLs of the JSON API, mounted under /api/ (no trailing slashes, as documented)."""

from __future__ import annotations

from django.urls import path, re_path

from conversations.api import export_views, schema, views
from conversations.live import sse

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
    path("runs/<id:run_id>/resume", views.run_resume, name="api_run_resume"),
    path("runs/<id:run_id>/regenerate", views.run_regenerate, name="api_run_regenerate"),
    path("runs/<id:run_id>/select", views.run_select, name="api_run_select"),
    path("messages/<id:message_id>/edit", views.message_edit, name="api_message_edit"),
    path("messages/<id:message_id>/select", views.message_select, name="api_message_select"),
    path(
        "runs/<id:run_id>/approvals/<str:call_id>",
        views.run_approval,
        name="api_run_approval",
    ),
    path("messages/<id:message_id>/pin", views.message_pin, name="api_message_pin"),
    path("messages/<id:message_id>/unpin", views.message_unpin, name="api_message_unpin"),
    path("models", views.model_list, name="api_models"),
    path("tools", views.tool_list, name="api_tools"),
    path("schema", schema.schema_view, name="api_schema"),
    path("conversations/import", export_views.conversation_import, name="api_conversation_import"),
    path(
        "conversations/<id:conversation_id>/export",
        export_views.conversation_export,
        name="api_conversation_export",
    ),
    path(
        "conversations/<id:conversation_id>/shares",
        export_views.conversation_shares,
        name="api_conversation_shares",
    ),
    path("shares", export_views.share_list, name="api_shares"),
    path("shares/<id:share_id>", export_views.share_detail, name="api_share"),
    re_path(r"^(?P<path>.*)$", views.not_found, name="api_not_found"),
]
