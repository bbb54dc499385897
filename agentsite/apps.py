from __future__ import annotations

from django.apps import AppConfig


class AgentsiteConfig(AppConfig):
    """Project-level hooks: system checks, the configuration and user caches' invalidation."""

    name = "agentsite"
    verbose_name = "agentsite"

    def ready(self) -> None:
        from agentsite import (
            auth,
            checks,  # noqa: F401  (registers the checks)
            configcache,
        )

        configcache.connect_signals()
        auth.connect_signals()
