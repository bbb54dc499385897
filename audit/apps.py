from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AuditConfig(AppConfig):
    """The audit log: an append-only record of sign-ins and of changes people make."""

    name = "audit"
    verbose_name = _("Audit log")

    def ready(self) -> None:
        from audit import receivers  # models: once the app registry is ready

        receivers.connect()
