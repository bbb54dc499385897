"""Audit of configuration changes made in the admin: a ModelAdmin mixin.

Why the admin and not ``pre_save``/``post_save`` signals with the actor in a context
variable set by a middleware: the admin is where people change providers, models, tools,
MCP servers, groups and role assignments, and it knows the actor, the request and what the
change was (the form, its inlines, the many-to-many fields saved after the row). Signals
fire for every save, including the system's own bookkeeping (a probe's results, an MCP
health check, the tool registry's sync, a default model moved by a service), so each would
need telling apart from a person's change, many-to-many changes arrive as separate
signals, and ``QuerySet.update`` sends none at all: the diff would be noisy and
incomplete at once. A mixin records one event per person's change with the whole
before/after, and it costs one line per admin class.

The one signal-based record is group membership (``audit.receivers``): it must also catch
changes that come from outside the admin (the future SSO sync). While a mixin's view runs,
:func:`audit.services.acting` tells those receivers who is acting.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.http import HttpRequest, HttpResponse

from audit import services

__all__ = ["AuditedAdminMixin"]

BEFORE = "_audit_before"


def _fresh(obj: models.Model) -> models.Model | None:
    if obj.pk is None:
        return None
    return type(obj)._default_manager.filter(pk=obj.pk).first()


class AuditedAdminMixin:
    """Records ``<name>.created``, ``<name>.changed`` (only when something changed) and
    ``<name>.deleted`` with ``{field: [before, after]}``, for the admin's own model and its
    inlines' rows. Put it before ``admin.ModelAdmin`` in the bases."""

    audit_exclude: tuple[str, ...] = ()

    # -- who acts: receivers of model signals read it while the admin's views run

    def changeform_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with services.acting(request):
            return super().changeform_view(request, *args, **kwargs)

    def changelist_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with services.acting(request):
            return super().changelist_view(request, *args, **kwargs)

    def delete_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with services.acting(request):
            return super().delete_view(request, *args, **kwargs)

    # -- the row before: read before the form's values are applied (the change form), or
    # from the database when the admin saves a row it changed in memory (list_editable)

    def _snapshot(self, obj: models.Model | None) -> dict[str, Any]:
        return services.snapshot(obj, exclude=self.audit_exclude)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None):
        obj = super().get_object(request, object_id, from_field)
        if obj is not None and request.method == "POST":
            setattr(obj, BEFORE, self._snapshot(obj))
        return obj

    def save_model(self, request: HttpRequest, obj: models.Model, form: Any, change: bool) -> None:
        if not hasattr(obj, BEFORE):
            setattr(obj, BEFORE, self._snapshot(_fresh(obj)) if change else {})
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        obj = form.instance
        before = getattr(obj, BEFORE, None)
        if before is None:
            before = {}
            change = False
        after = self._snapshot(_fresh(obj))
        changes = services.diff(before, after)
        if change and not changes:
            return
        verb = "changed" if change else "created"
        services.record(
            f"{services.target_name(obj)}.{verb}",
            actor=request.user,
            target=obj,
            changes=changes,
            request=request,
        )

    def save_formset(self, request: HttpRequest, form: Any, formset: Any, change: bool) -> None:
        # Keyed by the instance: a deleted row's pk is gone once it is deleted.
        before = {
            id(f.instance): (f.instance.pk, self._snapshot(_fresh(f.instance)))
            for f in formset.initial_forms
            if f.instance.pk is not None
        }
        super().save_formset(request, form, formset, change)
        for obj in formset.new_objects:
            self._record_row(request, obj, obj.pk, "created", {}, self._snapshot(obj))
        for obj, _fields in formset.changed_objects:
            pk, old = before.get(id(obj), (obj.pk, {}))
            self._record_row(request, obj, pk, "changed", old, self._snapshot(_fresh(obj)))
        for obj in formset.deleted_objects:
            pk, old = before.get(id(obj), (obj.pk, {}))
            self._record_row(request, obj, pk, "deleted", old, {})

    def _record_row(
        self, request: HttpRequest, obj: Any, pk: Any, verb: str, before: dict, after: dict
    ) -> None:
        changes = services.diff(before, after)
        if verb == "changed" and not changes:
            return
        services.record(
            f"{services.target_name(obj)}.{verb}",
            actor=request.user,
            target=obj,
            target_id=pk,
            changes=changes,
            request=request,
        )

    # -- deletions: the row's values before, nothing after

    def delete_model(self, request: HttpRequest, obj: models.Model) -> None:
        before, pk = self._snapshot(obj), obj.pk
        super().delete_model(request, obj)
        self._record_deleted(request, obj, pk, before)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        rows = [(obj, obj.pk, self._snapshot(obj)) for obj in queryset]
        super().delete_queryset(request, queryset)
        for obj, pk, before in rows:
            self._record_deleted(request, obj, pk, before)

    def _record_deleted(self, request: HttpRequest, obj: Any, pk: Any, before: dict) -> None:
        services.record(
            f"{services.target_name(obj)}.deleted",
            actor=request.user,
            target=obj,
            target_id=pk,
            changes=services.diff(before, {}),
            request=request,
        )
