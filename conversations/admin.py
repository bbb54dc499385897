from __future__ import annotations

from django.contrib import admin

from conversations.models import (
    CompactionSummary,
    Conversation,
    ExternalIdentity,
    Message,
    Run,
    RunEvent,
    SharedLink,
)


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    fields = ("seq", "role", "kind", "content", "pinned", "created_at")
    readonly_fields = fields
    can_delete = False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("__str__", "owner", "model", "archived", "updated_at")
    list_filter = ("archived",)
    search_fields = ("title", "owner__username")
    raw_id_fields = ("owner",)
    inlines = [MessageInline]


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "status", "iterations", "elapsed", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("conversation", "trigger_message")


@admin.register(RunEvent)
class RunEventAdmin(admin.ModelAdmin):
    list_display = ("id", "conversation", "run", "seq", "channel")
    list_filter = ("channel",)
    raw_id_fields = ("conversation", "run")


@admin.register(CompactionSummary)
class CompactionSummaryAdmin(admin.ModelAdmin):
    """Read-only: summaries are written by runs, never by hand."""

    list_display = (
        "conversation",
        "covers_up_to_seq",
        "original_count",
        "kept_count",
        "model_used",
        "created_at",
    )
    raw_id_fields = ("conversation", "run")
    readonly_fields = (
        "conversation",
        "run",
        "summary",
        "covers_up_to_seq",
        "original_count",
        "kept_count",
        "model_used",
        "created_at",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SharedLink)
class SharedLinkAdmin(admin.ModelAdmin):
    """Read-only but for revoking: links are made and revoked by their owners; an admin
    may revoke one (set "revoked at") and no one edits a snapshot by hand."""

    list_display = (
        "__str__",
        "owner",
        "conversation",
        "include_artifacts",
        "include_files",
        "created_at",
    )
    list_filter = ("include_artifacts", "include_files", ("revoked_at", admin.EmptyFieldListFilter))
    search_fields = ("title", "owner__username")
    raw_id_fields = ("owner", "conversation")
    exclude = ("token", "snapshot")  # the token is the key to the public page
    readonly_fields = (
        "owner",
        "conversation",
        "title",
        "include_artifacts",
        "include_files",
        "created_at",
    )

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(ExternalIdentity)
class ExternalIdentityAdmin(admin.ModelAdmin):
    """Who signs in through the identity provider or directory, and what it last said.

    Read-only: sign-ins write these rows. Deleting one unlinks the user from the provider
    (their next sign-in there makes a new user; the old one keeps its conversations)."""

    list_display = ("user", "source", "subject", "checked_at", "disabled_at")
    list_filter = ("source", ("disabled_at", admin.EmptyFieldListFilter))
    search_fields = ("user__username", "subject")
    exclude = ("refresh_token",)
    readonly_fields = (
        "user",
        "source",
        "subject",
        "groups",
        "checked_at",
        "disabled_at",
        "created_at",
    )

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

