from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    """The project package as an app: its system checks, URL converter and management commands."""

    name = "agentsite"
    verbose_name = "agentsite"

    def ready(self) -> None:
        from agentsite import checks, converters  # noqa: F401  (checks registers the checks)

        converters.register()
