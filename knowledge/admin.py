"""Knowledge bases in the admin: who owns each, and sharing (groups, or everyone, which
only an admin can set), audited like other admin changes. Documents are listed with
their status; their text is the owner's and is not shown."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from audit.adminmixin import AuditedAdminMixin
from knowledge import services
from knowledge.models import Document, KnowledgeBase


class DocumentInline(admin.TabularInline):
    model = Document
    fields = [
        "name",
        "status",
        "error",
        "chunk_count",
        "embedded_with",
        "created_at",
        "indexed_at",
    ]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(KnowledgeBase)
class KnowledgeBaseAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = ["name", "owner", "shared_with_everyone", "created_at"]
    list_filter = ["shared_with_everyone", "shared_groups"]
    search_fields = ["name", "owner__username"]
    list_select_related = ["owner"]
    fields = ["name", "owner", "description", "shared_groups", "shared_with_everyone"]
    readonly_fields = ["owner"]
    filter_horizontal = ["shared_groups"]
    inlines = [DocumentInline]
    actions = ["reindex_documents"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # bases are made by their owners (the API)

    @admin.action(description=_("Re-index their documents (after changing the embedding model)"))
    def reindex_documents(self, request: HttpRequest, queryset: QuerySet[KnowledgeBase]) -> None:
        count = services.documents_reindex(Document.objects.filter(base__in=queryset))
        message = ngettext(
            "%(count)d document queued for indexing.",
            "%(count)d documents queued for indexing.",
            count,
        ) % {"count": count}
        self.message_user(request, message, messages.SUCCESS)
