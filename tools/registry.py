"""The site-wide registry of tools that code provides (built-ins, HTTP endpoints, MCP).

A :class:`ToolSpec` is what a module registers at import time; it describes the tool and
knows how to build engine :class:`engine.Tool` objects from the admin's JSON config for one
run (``ToolContext``). ``tools.services`` intersects these specs with the admin's
``ToolConfig`` rows and the user's groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import Tool

__all__ = ["ToolContext", "ToolSpec", "all_specs", "get_spec", "register", "spec_for_tool"]


@dataclass
class ToolContext:
    """Who a run's tools act for, and where their artifacts go."""

    user_id: int | None = None
    conversation_id: int | None = None
    run_id: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolSpec:
    name: str
    description: str
    build: Callable[[dict[str, Any], ToolContext], list[Tool]]
    config_schema: dict[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    default_config: dict[str, Any] = field(default_factory=dict)
    enabled_by_default: bool = True
    requires_confirmation: bool = False
    # Why the tool cannot work with a configuration ("" when it can): such a tool is never
    # offered to a model (it would only collect errors), and the admin sees why.
    unavailable: Callable[[dict[str, Any]], str] | None = None


def spec_for_tool(tool: Tool, **options: Any) -> ToolSpec:
    """A spec that hands out one fixed engine tool whatever the config (tests, simple tools)."""
    return ToolSpec(
        name=tool.name, description=tool.description, build=lambda config, context: [tool],
        **options,
    )  # fmt: skip


_SPECS: dict[str, ToolSpec] = {}


def register(spec: ToolSpec) -> ToolSpec:
    """Register (or re-register, on module reload) a tool spec under its name."""
    _SPECS[spec.name] = spec
    return spec


def get_spec(name: str) -> ToolSpec | None:
    return _SPECS.get(name)


def all_specs() -> list[ToolSpec]:
    return list(_SPECS.values())
