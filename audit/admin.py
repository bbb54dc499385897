"""The audit log in the admin: read-only, filtered, exported as CSV or JSON lines.

Also audits the admin's user page (group membership, staff and superuser flags): it is
django.contrib.auth's ``UserAdmin``, registered again with the audit mixin (the documented
way to extend a registered admin).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.urls import path
from django.utils import timezone
from django.utils.http import content_disposition_header
from django.utils.translation import gettext

from audit.adminmixin import AuditedAdminMixin
from audit.exporting import csv_lines, json_lines
from audit.models import AuditEvent

EXPORTS = {
    "csv": (csv_lines, "text/csv; charset=utf-8"),
    "jsonl": (json_lines, "application/x-ndjson; charset=utf-8"),
}


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["occurred_at", "actor_name", "action", "target_type", "target_label", "address"]
    list_filter = [
        "action",
        ("actor", admin.RelatedOnlyFieldListFilter),
        "occurred_at",
    ]
    search_fields = ["target_label", "actor_name"]
    date_hierarchy = "occurred_at"
    list_select_related = ["actor"]
    actions = None
    readonly_fields = [f.name for f in AuditEvent._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        custom = [
            path(
                "export/<str:fmt>/",
                self.admin_site.admin_view(self.export_view),
                name=f"{prefix}_export",
            )
        ]
        return custom + super().get_urls()

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        # The export links (change_list.html) keep the list's filters and search.
        context = {"export_query": request.GET.urlencode(), **(extra_context or {})}
        return super().changelist_view(request, context)

    def export_view(self, request: HttpRequest, fmt: str) -> HttpResponse:
        """The list as filtered on the page (the same query string), every row of it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if fmt not in EXPORTS:
            return HttpResponseBadRequest(gettext("Choose csv or jsonl."))
        try:
            changelist = self.get_changelist_instance(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest(gettext("Unknown filter."))
        lines, content_type = EXPORTS[fmt]
        response = StreamingHttpResponse(lines(changelist.queryset), content_type=content_type)
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
        response["Content-Disposition"] = content_disposition_header(True, f"audit-{stamp}.{fmt}")
        response["Cache-Control"] = "private, no-store"
        return response


User = get_user_model()
if admin.site.is_registered(User) and isinstance(admin.site.get_model_admin(User), UserAdmin):
    _registered = type(admin.site.get_model_admin(User))
    admin.site.unregister(User)

    @admin.register(User)
    class AuditedUserAdmin(AuditedAdminMixin, _registered):
        # Membership is recorded as group.joined / group.left (audit.receivers); the
        # last login is the auth.login events.
        audit_exclude = ("groups", "last_login")
