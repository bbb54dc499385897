from __future__ import annotations

from django.apps import AppConfig


class CoreConfig(AppConfig):
    """The shared core as an app: its system checks, URL converter, model and commands."""

    name = "core"
    verbose_name = "core"

    def ready(self) -> None:
        from core import checks, converters  # noqa: F401  (checks registers the checks)

        converters.register()
