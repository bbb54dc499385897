from __future__ import annotations

from django.contrib import admin
from django.db.models import BigIntegerField, Count, OuterRef, Subquery, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from conversations.models import (
    CompactionSummary,
    Conversation,
    ExternalIdentity,
    Message,
    Preset,
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
    """A run's record, read-only: runs write it, and a change here would rewrite what the
    user was shown."""

    list_display = ("id", "conversation", "status", "iterations", "seconds", "created_at")
    list_filter = ("status",)
    raw_id_fields = ("conversation", "trigger_message")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description=_("elapsed"), ordering="elapsed")
    def seconds(self, obj: Run) -> str:
        if obj.elapsed is None:
            return "–"
        return gettext("%(seconds)s s") % {"seconds": f"{obj.elapsed:.1f}"}


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


@admin.register(Preset)
class PresetAdmin(admin.ModelAdmin):
    """Presets, with what they are used for: conversations started from each, their
    runs and tokens. An admin's preset without an owner is everyone's."""

    list_display = [
        "name",
        "owner_name",
        "model",
        "mode",
        "conversation_count",
        "run_count",
        "tokens",
    ]
    list_filter = ["mode", "shared_groups"]
    search_fields = ["name", "description", "owner__username"]
    autocomplete_fields = ["owner"]
    filter_horizontal = ["knowledge", "shared_groups"]
    readonly_fields = ["created_at", "updated_at"]

    def get_queryset(self, request):
        # The runs' tokens, summed per preset apart from the counts' joins.
        tokens = (
            Run.objects.filter(conversation__preset=OuterRef("pk"))
            .annotate(spent=Cast(KT("usage__total_tokens"), BigIntegerField()))
            .values("conversation__preset")
            .annotate(total=Sum("spent"))
            .values("total")
        )
        return (
            super()
            .get_queryset(request)
            .select_related("owner", "model")
            .annotate(
                conversation_total=Count("conversations", distinct=True),
                run_total=Count("conversations__runs", distinct=True),
                token_total=Subquery(tokens),
            )
        )

    @admin.display(description=_("owner"), ordering="owner__username")
    def owner_name(self, obj: Preset) -> str:
        return obj.owner.get_username() if obj.owner else gettext("everyone (admin's)")

    @admin.display(description=_("conversations"), ordering="conversation_total")
    def conversation_count(self, obj: Preset) -> int:
        return obj.conversation_total

    @admin.display(description=_("runs"), ordering="run_total")
    def run_count(self, obj: Preset) -> int:
        return obj.run_total

    @admin.display(description=_("tokens"), ordering="token_total")
    def tokens(self, obj: Preset) -> str:
        return f"{obj.token_total or 0:,}"
