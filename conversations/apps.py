from __future__ import annotations

from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    """Conversations, agent runs and their event log."""

    name = "conversations"
    verbose_name = "Conversations"

    def ready(self) -> None:
        from conversations.accounts import users  # models: once the app registry is ready

        users.connect_signals()
