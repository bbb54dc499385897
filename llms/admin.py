"""Admin for providers, models, role assignments, usage and quotas.

Thin: the rules live in llms.services (and the probe summary in llms.probe).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Sum
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import get_object_or_404
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.http import content_disposition_header
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST

from audit.adminmixin import AuditedAdminMixin
from core.errors import ApplicationError
from llms.admin_connection import ConnectionAdminMixin
from llms.discovery import (
    discover_local_server,
    discover_local_servers,
    discovered_model_add,
    discovery_ports,
)
from llms.forms import (
    ABILITY_LABELS,
    EmbeddingModelAdminForm,
    LLMModelAdminForm,
    ProviderAdminForm,
    RoleAssignmentAdminForm,
    RoleAssignmentInlineFormSet,
)
from llms.models import (
    ABILITY_FLAGS,
    ROLES,
    EmbeddingModel,
    LLMModel,
    Provider,
    RoleAssignment,
    UsageQuota,
    UsageRecord,
)
from llms.probe import CHECKS, probe_summary
from llms.services import (
    model_apply_verified_abilities,
    model_ensure_default,
    model_probe_and_apply,
    model_save,
    model_set_default,
)
from llms.usage import BREAKDOWNS, PERIODS, dashboard, period_days, period_start
from llms.usage_export import csv_lines, filename, table_csv_lines

# Secrets are posted by these forms: keep them out of error reports (DEBUG pages, mails).
sensitive_form = method_decorator(sensitive_post_parameters())


class LLMModelInline(admin.TabularInline):
    model = LLMModel
    fields = ["model_id", "display_name", "enabled", "is_default", "probed_at"]
    readonly_fields = ["is_default", "probed_at"]
    extra = 0
    show_change_link = True


@admin.register(Provider)
class ProviderAdmin(ConnectionAdminMixin, AuditedAdminMixin, admin.ModelAdmin):
    form = ProviderAdminForm
    list_display = ["name", "kind", "base_url", "timeout", "has_api_key", "model_count"]
    list_filter = ["kind"]
    search_fields = ["name", "base_url"]
    inlines = [LLMModelInline]
    fieldsets = [
        (None, {"fields": ["name", "kind", "base_url", "timeout"]}),
        (
            _("Credentials (write-only, encrypted at rest)"),
            {
                "fields": [
                    "new_api_key",
                    "clear_api_key",
                    "new_extra_headers",
                    "clear_extra_headers",
                ]
            },
        ),
    ]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(_model_count=Count("models"))

    @admin.display(boolean=True, description=_("API key set"))
    def has_api_key(self, obj: Provider) -> bool:
        return bool(obj.api_key)

    @admin.display(description=_("models"), ordering="_model_count")
    def model_count(self, obj: Provider) -> int:
        return obj._model_count

    @sensitive_form
    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(request, *args, **kwargs)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        model_ensure_default()


@admin.register(LLMModel)
class LLMModelAdmin(AuditedAdminMixin, admin.ModelAdmin):
    form = LLMModelAdminForm
    list_display = [
        "__str__",
        "provider",
        "model_id",
        "enabled",
        "is_default",
        "roles_list",
        "declared_list",
        "probe_result",
    ]
    list_filter = ["provider", "enabled", "is_default"]
    list_select_related = ["provider"]
    search_fields = ["model_id", "display_name", "provider__name"]
    filter_horizontal = ["allowed_groups"]
    readonly_fields = ["probe_result", "capabilities", "probed_at"]
    actions = ["probe_capabilities", "apply_verified_abilities", "make_default"]

    class Media:
        css = {"all": ["llms/admin.css"]}  # capabilities.html: classes, no inline style (CSP)

    fieldsets = [
        (None, {"fields": ["provider", "model_id", "display_name", "enabled", "is_default"]}),
        (
            _("Capabilities"),
            {
                "fields": [
                    "abilities",
                    "json_schema_dialect",
                    "context_window",
                    "max_output_tokens",
                    "rewrite_answer",
                    "small",
                    "roles",
                ]
            },
        ),
        (
            _("Prices"),
            {
                "fields": ["input_price", "output_price", "currency"],
                "description": _(
                    "Per million tokens, as the provider bills them. Each run's "
                    "cost is computed at the prices when it ends (usage pages, the usage "
                    "dashboard); leave both empty for a model that costs nothing known."
                ),
            },
        ),
        (
            _("In chats"),
            {
                "fields": [
                    "system_prompt",
                    ("temperature_min", "temperature_max"),
                    ("top_p_min", "top_p_max"),
                ],
                "description": _(
                    "What the agent is told in every chat with this model (before "
                    "the user's instructions and the chat's own prompt), and the range of "
                    "temperature and top_p a chat's settings or a preset may choose (max output "
                    "tokens: up to the model's max output tokens)."
                ),
            },
        ),
        (_("Declared versus verified"), {"fields": ["probe_result", "capabilities", "probed_at"]}),
        (_("Access"), {"fields": ["allowed_groups"]}),
    ]

    @admin.display(description=_("roles"))
    def roles_list(self, obj: LLMModel) -> str:
        return ", ".join(obj.roles or ()) or "—"

    @admin.display(description=_("declared abilities"))
    def declared_list(self, obj: LLMModel) -> str:
        abilities = obj.abilities or {}
        return ", ".join(f for f in ABILITY_FLAGS if abilities.get(f) is True) or "—"

    @admin.display(description=_("last probe"), ordering="probed_at")
    def probe_result(self, obj: LLMModel) -> str:
        return probe_summary(obj)

    @admin.display(description=_("Probe"))
    def capabilities(self, obj: LLMModel) -> SafeString:
        declared = obj.abilities or {}
        verified = obj.verified_abilities or {}
        rows = [
            {
                "name": flag,
                "label": ABILITY_LABELS[flag],
                "declared": declared.get(flag) is True,
                "verified": verified.get(flag),
                "differs": flag in verified and verified[flag] != (declared.get(flag) is True),
            }
            for flag in ABILITY_FLAGS
        ]
        report = obj.probe_report or {}
        checks = [
            {"label": label, **(report.get("checks") or {}).get(name, {})}
            for name, label in CHECKS.items()
            if name in (report.get("checks") or {})
        ]
        html = render_to_string(
            "admin/llms/llmmodel/capabilities.html",
            {"obj": obj, "rows": rows, "checks": checks, "report": report},
        )
        return mark_safe(html)  # rendered by the template engine, autoescaped

    def save_model(self, request: HttpRequest, obj: LLMModel, form: Any, change: bool) -> None:
        model_save(model=obj)

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        # The "Find local model servers" button (change_list.html) for those who may use it.
        context = {"can_discover": self.has_change_permission(request), **(extra_context or {})}
        return super().changelist_view(request, context)

    # -- probe and apply: actions for the list, buttons (POST views) on the change form

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        custom = [
            path(
                "discover/",
                self.admin_site.admin_view(self.discover_view),
                name=f"{prefix}_discover",
            ),
            path(
                "discover/add/",
                self.admin_site.admin_view(self.discover_add_view),
                name=f"{prefix}_discover_add",
            ),
            path(
                "<path:object_id>/probe/",
                self.admin_site.admin_view(self.probe_view),
                name=f"{prefix}_probe",
            ),
            path(
                "<path:object_id>/apply-verified/",
                self.admin_site.admin_view(self.apply_verified_view),
                name=f"{prefix}_apply_verified",
            ),
        ]
        return custom + super().get_urls()

    def _changeable(self, request: HttpRequest, object_id: str) -> LLMModel:
        obj = get_object_or_404(LLMModel.objects.select_related("provider"), pk=object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        return obj

    def _back(self, obj: LLMModel) -> HttpResponseRedirect:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_change"
        return HttpResponseRedirect(reverse(name, args=[obj.pk]))

    @method_decorator(require_POST)
    def probe_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self._changeable(request, object_id)
        self._probe(request, obj)
        return self._back(obj)

    @method_decorator(require_POST)
    def apply_verified_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        obj = self._changeable(request, object_id)
        self._apply(request, obj)
        return self._back(obj)

    def _probe(self, request: HttpRequest, obj: LLMModel) -> None:
        report, applied = model_probe_and_apply(model=obj)
        text = report.summary()
        if applied:
            text += " " + gettext("Its verified abilities are now applied.")
        level = messages.SUCCESS if report.reachable else messages.WARNING
        self.message_user(request, text, level)

    def _apply(self, request: HttpRequest, obj: LLMModel) -> None:
        try:
            model_apply_verified_abilities(model=obj)
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
        else:
            self.message_user(
                request, gettext("Applied the verified abilities to %(model)s.") % {"model": obj}
            )

    # -- local model servers (llms.discovery): a page listing them, a POST view adding one

    def discover_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": gettext("Local model servers"),
            "servers": discover_local_servers(),
            "ports": discovery_ports(),
        }
        return TemplateResponse(request, "admin/llms/llmmodel/discover.html", context)

    @method_decorator(require_POST)
    @method_decorator(sensitive_post_parameters("api_key"))
    def discover_add_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_change_permission(request):
            raise PermissionDenied
        back = HttpResponseRedirect(reverse("admin:llms_llmmodel_discover"))
        port = request.POST.get("port", "")
        if not port.isdigit() or int(port) not in discovery_ports():
            self.message_user(request, gettext("Choose a server from the list."), messages.ERROR)
            return back
        api_key = request.POST.get("api_key", "").strip() or None
        server = discover_local_server(port=int(port), api_key=api_key)
        if server is None:
            self.message_user(
                request,
                gettext("Nothing answers on port %(port)s any more.") % {"port": port},
                messages.ERROR,
            )
            return back
        try:
            added = discovered_model_add(
                server=server,
                model_id=request.POST.get("model_id", ""),
                make_default=request.POST.get("make_default") == "1",
                api_key=api_key,
            )
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return back
        level = messages.SUCCESS if added.report.reachable else messages.WARNING
        self.message_user(request, added.summary(), level)
        return self._back(added.model)

    @admin.action(description=_("Probe capabilities"), permissions=["change"])
    def probe_capabilities(self, request: HttpRequest, queryset) -> None:
        for obj in queryset.select_related("provider"):
            self._probe(request, obj)

    @admin.action(description=_("Apply verified abilities"), permissions=["change"])
    def apply_verified_abilities(self, request: HttpRequest, queryset) -> None:
        for obj in queryset:
            self._apply(request, obj)

    @admin.action(description=_("Make default"), permissions=["change"])
    def make_default(self, request: HttpRequest, queryset) -> None:
        if queryset.count() != 1:
            self.message_user(request, gettext("Select exactly one model."), messages.ERROR)
            return
        obj = queryset.get()
        model_set_default(model=obj)
        self.message_user(request, gettext("%(model)s is now the default model.") % {"model": obj})


@admin.register(EmbeddingModel)
class EmbeddingModelAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """The optional model behind knowledge bases' vector search (at most one enabled).
    Documents indexed before a change keep full-text search until re-indexed (the
    knowledge base admin's "Re-index" action)."""

    form = EmbeddingModelAdminForm
    list_display = ["__str__", "provider", "model_id", "dimensions", "enabled"]
    list_select_related = ["provider"]
    list_filter = ["enabled"]


@admin.register(RoleAssignment)
class RoleAssignmentAdmin(AuditedAdminMixin, admin.ModelAdmin):
    """Which model plan steps asking for a role get, per group or for everyone."""

    form = RoleAssignmentAdminForm
    list_display = ["role", "group_or_everyone", "model", "model_probe"]
    list_filter = ["role", "group"]
    list_select_related = ["group", "model__provider"]
    search_fields = ["group__name", "model__model_id", "model__display_name"]

    @admin.display(description=_("group"), ordering="group__name")
    def group_or_everyone(self, obj: RoleAssignment) -> str:
        return obj.group.name if obj.group else gettext("Everyone")

    @admin.display(description=_("model's last probe"), ordering="model__probed_at")
    def model_probe(self, obj: RoleAssignment) -> str:
        return probe_summary(obj.model)


class RoleAssignmentInline(admin.TabularInline):
    """The group's role models on its own page (the everyone rows: Role assignments)."""

    model = RoleAssignment
    form = RoleAssignmentAdminForm
    formset = RoleAssignmentInlineFormSet
    fields = ["role", "model"]
    extra = 0
    max_num = len(ROLES)
    verbose_name = _("plan-mode model for a role")
    verbose_name_plural = _("plan-mode models by role")


# django.contrib.auth registers Group; the documented way to add an inline is to
# register it again with a subclass of its admin.
admin.site.unregister(Group)


@admin.register(Group)
class LLMGroupAdmin(AuditedAdminMixin, GroupAdmin):
    inlines = [*GroupAdmin.inlines, RoleAssignmentInline]


@admin.register(UsageRecord)
class UsageRecordAdmin(admin.ModelAdmin):
    """Per-user, per-model daily usage with totals over the current filter."""

    list_display = [
        "day",
        "user",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "runs",
        "cost",
        "currency",
    ]
    list_filter = ["day", "model", ("user", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["user", "model"]
    date_hierarchy = "day"
    search_fields = ["user__username", "model__model_id", "model__display_name"]

    class Media:
        css = {"all": ["llms/admin.css"]}  # the totals tables: classes, no inline style (CSP)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # accounting is written by runs only; delete a row to forgive a day

    # -- the dashboard (figures by day, user, group and model) and its CSV export

    def get_urls(self):
        prefix = f"{self.opts.app_label}_{self.opts.model_name}"
        custom = [
            path(
                "dashboard/",
                self.admin_site.admin_view(self.dashboard_view),
                name=f"{prefix}_dashboard",
            ),
            path(
                "dashboard/export.csv",
                self.admin_site.admin_view(self.export_view),
                name=f"{prefix}_export",
            ),
        ]
        return custom + super().get_urls()

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """Everyone's usage over 7, 30 or 90 days (another ``days``: 30)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        days = period_days(request.GET.get("days"), strict=False)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": gettext("Usage dashboard"),
            "board": dashboard(days=days),
            "periods": PERIODS,
        }
        return TemplateResponse(request, "admin/llms/usagerecord/dashboard.html", context)

    def export_view(self, request: HttpRequest) -> HttpResponse:
        """The period's usage rows as CSV: one per day, user and model; with ``table``,
        that registered table of the dashboard instead (``preset``)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        days = period_days(request.GET.get("days"), strict=False)
        key = request.GET.get("table", "")
        if key:
            breakdown = BREAKDOWNS.get(key)
            if breakdown is None:
                raise Http404
            lines = breakdown.lines(period_start(days, today=timezone.localdate()))
            rows: Iterable[str] = table_csv_lines(lines)
        else:
            rows = csv_lines(days)
        response = StreamingHttpResponse(rows, content_type="text/csv; charset=utf-8")
        name = filename(days, timezone.localdate(), key)
        response["Content-Disposition"] = content_disposition_header(True, name)
        response["Cache-Control"] = "private, no-store"
        return response

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if not context or "cl" not in context:
            return response
        queryset = context["cl"].queryset
        sums = {
            "prompt": Sum("prompt_tokens"),
            "completion": Sum("completion_tokens"),
            "total": Sum("total_tokens"),
            "runs": Sum("runs"),
        }
        context["usage_totals"] = queryset.aggregate(**sums)
        context["usage_by_user"] = (
            queryset.order_by().values("user__username").annotate(**sums).order_by("-total")[:20]
        )
        context["usage_by_model"] = (
            queryset.order_by()
            .values("model__display_name", "model__model_id")
            .annotate(**sums)
            .order_by("-total")[:20]
        )
        return response


@admin.register(UsageQuota)
class UsageQuotaAdmin(admin.ModelAdmin):
    list_display = ["__str__", "group", "user", "daily_token_limit"]
    list_select_related = ["group", "user"]
    autocomplete_fields = ["group", "user"]
    search_fields = ["group__name", "user__username"]
