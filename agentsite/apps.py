from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    """Project-level hooks: system checks and the configuration cache's invalidation."""

    name = "agentsite"
    verbose_name = "agentsite"

    def ready(self) -> None:
        from agentsite import checks  # noqa: F401  (registers the checks)
        from agentsite.configcache import connect_signals

        connect_signals()
