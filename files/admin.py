"""Stored files in the admin: read-only metadata. Neither the bytes nor the extracted text
are shown (they are the user's), and nothing is added, changed or deleted here: a file
goes with its conversation or through the API, which also removes its blob."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from files.models import StoredFile


@admin.register(StoredFile)
class StoredFileAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "kind", "size", "created_at"]
    list_filter = ["kind", "created_at"]
    search_fields = ["name", "owner__username", "sha256"]
    date_hierarchy = "created_at"
    list_select_related = ["owner"]
    actions = None
    fields = ["owner", "name", "kind", "content_type", "size", "sha256", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
