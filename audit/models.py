"""The audit log's one model, append-only.

A row is written once (:func:`audit.services.record`) and never changed or deleted through
the ORM: ``save()`` of an existing row, ``delete()``, and the manager's queryset
``update()``/``delete()`` raise :class:`AppendOnlyError`. The one write Django itself makes
is ``SET_NULL`` on ``actor`` when a user is deleted (through the model's base manager, a
plain one); the actor's username stays in ``actor_name``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AppendOnlyError(Exception):
    """An audit event may be added, never changed or deleted."""


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs: Any) -> int:
        raise AppendOnlyError("Audit events cannot be changed.")

    def delete(self) -> tuple[int, dict[str, int]]:
        raise AppendOnlyError("Audit events cannot be deleted.")

    def bulk_update(self, objs: Any, fields: Any, batch_size: int | None = None) -> int:
        raise AppendOnlyError("Audit events cannot be changed.")


class AuditEvent(models.Model):
    occurred_at = models.DateTimeField(_("when"), default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("actor"),
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    actor_name = models.CharField(
        _("username"), max_length=150, blank=True, help_text=_("Kept when the user is deleted.")
    )
    action = models.CharField(verbose_name=_("action"), max_length=64, db_index=True)
    target_type = models.CharField(verbose_name=_("target type"), max_length=100, blank=True)
    target_id = models.CharField(verbose_name=_("target id"), max_length=64, blank=True)
    target_label = models.CharField(verbose_name=_("target label"), max_length=300, blank=True)
    changes = models.JSONField(
        verbose_name=_("changes"),
        default=dict,
        blank=True,
        encoder=DjangoJSONEncoder,
        help_text=_("{field: [before, after]}"),
    )
    address = models.CharField(_("client address"), max_length=45, blank=True)
    request_id = models.CharField(verbose_name=_("request id"), max_length=100, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        verbose_name_plural = _("audit events")
        ordering = ["-occurred_at", "-id"]
        verbose_name = _("audit event")
        indexes = [models.Index(fields=["action", "occurred_at"], name="audit_action_when")]

    def __str__(self) -> str:
        who = self.actor_name or "system"
        target = f" {self.target_label}" if self.target_label else ""
        return f"{who}: {self.action}{target}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AppendOnlyError("Audit events cannot be changed.")
        kwargs["force_insert"] = True
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise AppendOnlyError("Audit events cannot be deleted.")
