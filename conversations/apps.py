from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ConversationsConfig(AppConfig):
    """Conversations, agent runs and their event log."""

    name = "conversations"
    verbose_name = _("Conversations")

    def ready(self) -> None:
        # Here: models load once the app registry is ready.
        from conversations.accounts import checks, users  # noqa: F401 (checks register)

        users.connect_signals()

        # The admin's usage dashboard, by preset (models load once the registry is ready).
        from conversations.preset_usage import BY_PRESET  # noqa: PLC0415 (models)
        from llms.usage import breakdown_register  # noqa: PLC0415 (models)

        breakdown_register(BY_PRESET)
