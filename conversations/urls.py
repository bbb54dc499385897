from __future__ import annotations

from django.urls import path

from conversations import views

urlpatterns = [
    path("", views.conversation_list, name="conversation_list"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path("c/<id:conversation_id>/", views.conversation_detail, name="conversation_detail"),
    path("c/<id:conversation_id>/messages/", views.message_post, name="message_post"),
    path("c/<id:conversation_id>/rename/", views.conversation_rename, name="conversation_rename"),
    path(
        "c/<id:conversation_id>/archive/", views.conversation_archive, name="conversation_archive"
    ),
    path("c/<id:conversation_id>/delete/", views.conversation_delete, name="conversation_delete"),
    path("c/<id:conversation_id>/model/", views.conversation_model, name="conversation_model"),
    path("runs/<id:run_id>/cancel/", views.run_cancel, name="run_cancel"),
    path("runs/<id:run_id>/retry/", views.run_retry, name="run_retry"),
    path("runs/<id:run_id>/approvals/<str:call_id>/", views.run_approval, name="run_approval"),
    path("runs/<id:run_id>/summary/", views.run_summary, name="run_summary"),
    path("runs/<id:run_id>/artifacts/", views.run_artifacts, name="run_artifacts"),
    path("m/<id:message_id>/pin/", views.message_pin, name="message_pin"),
]
