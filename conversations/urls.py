from __future__ import annotations

from django.urls import path

from conversations import views

urlpatterns = [
    path("", views.conversation_list, name="conversation_list"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path("c/<int:conversation_id>/", views.conversation_detail, name="conversation_detail"),
]
