"""Admin for MCP servers (secrets write-only, health visible, connection check as an action)
and for artifacts (read-only).

Imported by ``tools/admin.py`` (Django only autodiscovers ``admin`` modules).
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _

from audit.adminmixin import AuditedAdminMixin
from tools.mcp.services import mcp_server_refresh
from tools.models import Artifact, MCPServer

__all__ = ["ArtifactAdmin", "MCPServerAdmin", "MCPServerForm"]

_SECRET_HELP = _(
    "JSON object of {name: value}. Stored encrypted and never shown again: leave blank to "
    "keep the current values, enter {} to remove them."
)


def _parse_secret_json(value: str, label: str) -> dict[str, str] | None:
    """None when left blank (keep), else a dict of strings (replace)."""
    if not value.strip():
        return None
    try:
        data = json.loads(value)
    except ValueError as exc:
        raise forms.ValidationError(
            gettext("%(label)s: not valid JSON (%(error)s)") % {"label": label, "error": exc}
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(v, str | int | float) for v in data.values()
    ):
        raise forms.ValidationError(
            gettext("%(label)s: must be a JSON object of string values") % {"label": label}
        )
    return {str(k): str(v) for k, v in data.items()}


class MCPServerForm(forms.ModelForm):
    env_input = forms.CharField(
        label=_("Environment (stdio)"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=_SECRET_HELP,
    )
    headers_input = forms.CharField(
        label=_("HTTP headers"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text=_SECRET_HELP,
    )

    confirm_tools = forms.MultipleChoiceField(
        label=_("Tools that require confirmation"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_(
            "With Requires confirmation off, every call of the tools ticked here waits "
            "for the user's approval (with it on, every tool's does). The server's tools are "
            "listed once it was reached: save first."
        ),
    )

    class Meta:
        model = MCPServer
        fields = [
            "name", "description", "enabled", "requires_confirmation", "confirm_tools",
            "transport", "command", "args", "url", "timeout", "allowed_groups",
        ]  # fmt: skip

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The server's listed tools, and any named before that it no longer lists.
        cached = self.instance.tools_cache or []
        listed = [str(t["name"]) for t in cached if isinstance(t, dict) and t.get("name")]
        chosen = [name for name in self.instance.confirm_tools or [] if name not in listed]
        self.fields["confirm_tools"].choices = [(name, name) for name in listed + chosen]

    def clean_env_input(self) -> dict[str, str] | None:
        return _parse_secret_json(self.cleaned_data.get("env_input", ""), gettext("Environment"))

    def clean_headers_input(self) -> dict[str, str] | None:
        return _parse_secret_json(
            self.cleaned_data.get("headers_input", ""), gettext("HTTP headers")
        )

    def save(self, commit: bool = True) -> MCPServer:
        server: MCPServer = super().save(commit=False)
        if self.cleaned_data.get("env_input") is not None:
            server.env_dict = self.cleaned_data["env_input"]
        if self.cleaned_data.get("headers_input") is not None:
            server.headers_dict = self.cleaned_data["headers_input"]
        if commit:
            server.save()
            self.save_m2m()
        return server


@admin.register(MCPServer)
class MCPServerAdmin(AuditedAdminMixin, admin.ModelAdmin):
    form = MCPServerForm
    list_display = [
        "name", "transport", "enabled", "requires_confirmation", "health_badge", "tool_count",
        "last_checked_at", "error_summary",
    ]  # fmt: skip
    list_filter = ["enabled", "transport", "health_status"]
    search_fields = ["name", "description", "command", "url"]
    filter_horizontal = ["allowed_groups"]
    actions = ["check_connection"]

    class Media:
        css = {"all": ["tools/admin.css"]}  # the health badge: classes, no inline style (CSP)

    readonly_fields = [
        "health_badge", "last_checked_at", "last_error", "tools_refreshed_at", "tool_list",
        "secrets_state",
    ]  # fmt: skip
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "name",
                    "description",
                    "enabled",
                    "requires_confirmation",
                    "confirm_tools",
                    "allowed_groups",
                ]  # fmt: skip
            },
        ),
        (_("Connection"), {"fields": ["transport", "command", "args", "url", "timeout"]}),
        (_("Secrets (write-only)"), {"fields": ["secrets_state", "env_input", "headers_input"]}),
        (
            _("Health"),
            {
                "fields": [
                    "health_badge",
                    "last_checked_at",
                    "last_error",
                    "tools_refreshed_at",
                    "tool_list",
                ]
            },
        ),  # fmt: skip
    ]

    @admin.display(description=_("Health"), ordering="health_status")
    def health_badge(self, obj: MCPServer) -> str:
        status = obj.health_status if obj.health_status in ("ok", "error") else "unknown"
        return format_html(
            '<strong class="mcp-health--{}">{}</strong>', status, obj.get_health_status_display()
        )

    @admin.display(description=_("Tools"))
    def tool_count(self, obj: MCPServer) -> int | str:
        return "-" if obj.tools_cache is None else obj.tool_count

    @admin.display(description=_("Last error"))
    def error_summary(self, obj: MCPServer) -> str:
        return truncatechars(obj.last_error, 80)

    @admin.display(description=_("Stored secrets"))
    def secrets_state(self, obj: MCPServer) -> str:
        env_keys = ", ".join(sorted(obj.env_dict)) or gettext("none")
        header_keys = ", ".join(sorted(obj.headers_dict)) or gettext("none")
        return gettext("environment: %(env)s; headers: %(headers)s (values hidden)") % {
            "env": env_keys,
            "headers": header_keys,
        }

    @admin.display(description=_("Tools offered"))
    def tool_list(self, obj: MCPServer) -> str:
        if not obj.tools_cache:
            return gettext(
                "Not listed yet: save, or use the action “Check connection / refresh tools”."
            )
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li><code>{}</code>: {}</li>",
                (
                    (t.get("name", ""), truncatechars(t.get("description", ""), 160))
                    for t in obj.tools_cache
                ),
            ),
        )

    def save_related(self, request: HttpRequest, form: forms.ModelForm, formsets, change) -> None:
        super().save_related(request, form, formsets, change)
        server = form.instance
        if server.enabled:
            self._refresh(request, server)

    @admin.action(description=_("Check connection / refresh tools"))
    def check_connection(self, request: HttpRequest, queryset: QuerySet[MCPServer]) -> None:
        for server in queryset:
            self._refresh(request, server)

    def _refresh(self, request: HttpRequest, server: MCPServer) -> None:

        server = mcp_server_refresh(server)
        if server.health_status == MCPServer.Health.OK:
            self.message_user(
                request,
                ngettext(
                    "%(name)s: connected, %(count)d tool.",
                    "%(name)s: connected, %(count)d tools.",
                    server.tool_count,
                )
                % {"name": server.name, "count": server.tool_count},
                messages.SUCCESS,
            )
        else:
            self.message_user(
                request,
                gettext("%(name)s: connection failed: %(error)s")
                % {"name": server.name, "error": truncatechars(server.last_error, 300)},
                messages.ERROR,
            )


@admin.register(Artifact)
class ArtifactAdmin(admin.ModelAdmin):
    """Read-only: artifacts are written by tools; staff may inspect or delete them."""

    list_display = ["name", "conversation", "tool_name", "mime_type", "size", "created_at"]
    list_filter = ["tool_name", "mime_type"]
    search_fields = ["name", "tool_name"]
    list_select_related = ["conversation"]
    readonly_fields = [
        "conversation", "run", "tool_name", "name", "mime_type", "size", "file", "created_at",
    ]  # fmt: skip

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Artifact | None = None) -> bool:
        return False
