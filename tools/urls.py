"""Artifact URLs; the project mounts them with ``path("artifacts/", include("tools.urls"))``."""

from __future__ import annotations

from django.urls import path

from tools import views

urlpatterns = [
    path("<id:artifact_id>/download/", views.artifact_download, name="artifact_download"),
    path("<id:artifact_id>/preview/", views.artifact_preview, name="artifact_preview"),
]
