from __future__ import annotations

import importlib
import pkgutil

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class ToolsConfig(AppConfig):
    """Built-in tools, their per-site configuration and MCP servers."""

    name = "tools"
    verbose_name = _("Tools")

    def ready(self) -> None:
        # Built-in tools register their specs at import: import the package and each of its
        # modules. ToolConfig rows are created lazily by tools.services.toolconfig_sync (no
        # queries at start-up).
        package = importlib.import_module("tools.builtin")
        for module in pkgutil.iter_modules(package.__path__):
            if not module.name.startswith("_"):
                importlib.import_module(f"{package.__name__}.{module.name}")

        # Models and what imports them load once the app registry is ready.
        from core import configcache
        from tools.models import MCPServer, ToolConfig

        # Runs build their tools from cached rows (core.configcache).
        links = (ToolConfig.allowed_groups.through, MCPServer.allowed_groups.through)
        configcache.watch(ToolConfig, MCPServer, links=links)
