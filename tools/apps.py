from __future__ import annotations

from django.apps import AppConfig


class ToolsConfig(AppConfig):
    """Built-in tools, their per-site configuration and MCP servers."""

    name = "tools"
    verbose_name = "Tools"
