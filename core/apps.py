from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class CoreConfig(AppConfig):
    """The shared core as an app: its system checks, URL converter, model and commands."""

    name = "core"
    verbose_name = _("core")

    def ready(self) -> None:
        from core import checks, converters  # noqa: F401  (checks registers the checks)

        converters.register()
