"""Admin for tool configuration. MCP servers and artifacts live in tools/admin_mcp.py.

Rows appear by themselves for every tool the code registers (synced when the list is
opened); they cannot be added by hand. Secret settings (``"x-secret": true`` in the
tool's config schema) get write-only inputs, like provider API keys.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.decorators import method_decorator
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters

from audit.adminmixin import AuditedAdminMixin
from core.forms import resolve_secret, write_only_field
from llms.models import secret_hint
from tools.models import ToolConfig
from tools.models.config import secret_keys
from tools.registry import ToolSpec
from tools.services import tool_unavailable_reason, toolconfig_sync

SECRET_PREFIX = "secret__"
CLEAR_PREFIX = "clear_secret__"


class ToolConfigAdminForm(forms.ModelForm):
    """Base form; :func:`toolconfig_form_for` adds one write-only input per secret key."""

    secret_names: tuple[str, ...] = ()

    class Meta:
        model = ToolConfig
        fields = [
            "enabled",
            "requires_confirmation",
            "description_override",
            "config",
            "allowed_groups",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        stored = self.instance.secrets_dict
        for key in self.secret_names:
            current = stored.get(key)
            field = self.fields[SECRET_PREFIX + key]
            hint = secret_hint(str(current) if current not in (None, "") else "", noun="value")
            field.help_text = escape(hint + " " + gettext("Leave empty to keep the current value."))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.secret_names:
            # Applied before model validation, so the schema sees the secrets too.
            stored = self.instance.secrets_dict
            merged = {}
            for key in self.secret_names:
                merged[key] = resolve_secret(
                    current=str(stored.get(key) or ""),
                    new=data.get(SECRET_PREFIX + key) or "",
                    clear=bool(data.get(CLEAR_PREFIX + key)),
                )
            self.instance.secrets_dict = {**stored, **merged}
        return data


def toolconfig_form_for(spec: ToolSpec | None) -> type[ToolConfigAdminForm]:
    names = tuple(secret_keys(spec))
    attrs: dict[str, Any] = {"secret_names": names}
    properties = (spec.config_schema.get("properties") or {}) if spec else {}
    for key in names:
        label = properties[key].get("title") or key.replace("_", " ")
        attrs[SECRET_PREFIX + key] = write_only_field(label=label, hint="")
        attrs[CLEAR_PREFIX + key] = forms.BooleanField(
            label=gettext("Clear %(setting)s") % {"setting": label}, required=False
        )
    return type("ToolConfigAdminForm", (ToolConfigAdminForm,), attrs)


@admin.register(ToolConfig)
class ToolConfigAdmin(AuditedAdminMixin, admin.ModelAdmin):
    list_display = [
        "name",
        "enabled",
        "requires_confirmation",
        "groups_list",
        "is_registered",
        "readiness",
    ]
    list_editable = ["enabled", "requires_confirmation"]
    list_filter = ["enabled", "requires_confirmation", "allowed_groups"]
    search_fields = ["name", "description_override"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["name", "tool_details"]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).prefetch_related("allowed_groups")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # rows come from the code's registry

    @admin.display(description=_("groups allowed"))
    def groups_list(self, obj: ToolConfig) -> str:
        return ", ".join(g.name for g in obj.allowed_groups.all()) or gettext("everyone")

    @admin.display(boolean=True, description=_("registered"))
    def is_registered(self, obj: ToolConfig) -> bool:
        return obj.registered

    @admin.display(description=_("offered to models"))
    def readiness(self, obj: ToolConfig) -> str:
        spec = obj.spec
        if spec is None:
            return gettext("no: not in the code any more")
        if not obj.enabled:
            return gettext("no: disabled")
        why = tool_unavailable_reason(spec, obj.effective_config())
        return gettext("no: %(reason)s") % {"reason": why} if why else gettext("yes")

    @admin.display(description=_("Tool"))
    def tool_details(self, obj: ToolConfig) -> SafeString:
        spec = obj.spec
        context = {"obj": obj, "spec": spec}
        if spec is not None:
            context["default_config"] = json.dumps(spec.default_config, indent=2, sort_keys=True)
            context["config_schema"] = json.dumps(spec.config_schema, indent=2)
        html = render_to_string("admin/tools/toolconfig/details.html", context)
        return mark_safe(html)  # rendered by the template engine, autoescaped

    def get_form(self, request: HttpRequest, obj: ToolConfig | None = None, **kwargs: Any):
        kwargs.setdefault("form", toolconfig_form_for(obj.spec if obj else None))
        return super().get_form(request, obj, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: ToolConfig | None = None):
        fieldsets: list[tuple[str | None, dict[str, Any]]] = [
            (None, {"fields": ["name", "enabled", "requires_confirmation"]}),
            (
                _("What the model sees and how the tool is set up"),
                {"fields": ["description_override", "config", "tool_details"]},
            ),
        ]
        secrets = secret_keys(obj.spec if obj else None)
        if secrets:
            fields = [name for key in secrets for name in (SECRET_PREFIX + key, CLEAR_PREFIX + key)]
            fieldsets.append(
                (_("Secret settings (write-only, encrypted at rest)"), {"fields": fields})
            )
        fieldsets.append((_("Access"), {"fields": ["allowed_groups"]}))
        return fieldsets

    @method_decorator(sensitive_post_parameters())
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(request, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        toolconfig_sync()
        return super().changelist_view(request, extra_context)


if importlib.util.find_spec("tools.admin_mcp") is not None:
    from tools import admin_mcp  # noqa: E402, F401  (MCP servers and artifacts)
