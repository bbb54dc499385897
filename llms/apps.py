from __future__ import annotations

from django.apps import AppConfig


class LlmsConfig(AppConfig):
    """LLM providers and models managed in the admin."""

    name = "llms"
    verbose_name = "LLM providers and models"
