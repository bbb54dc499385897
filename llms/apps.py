from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class LlmsConfig(AppConfig):
    """LLM providers and models managed in the admin."""

    name = "llms"
    verbose_name = _("LLM providers and models")

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.contrib.auth.models import Group

        # Models and what imports them load once the app registry is ready.
        from core import configcache
        from llms.models import LLMModel, Provider, RoleAssignment, UsageQuota

        configcache.watch(
            Provider,
            LLMModel,
            RoleAssignment,
            UsageQuota,
            Group,
            links=(LLMModel.allowed_groups.through, get_user_model().groups.through),
        )
