"""Tool configuration rows and the set of tools a run gets.

The tools handed to a run are: registered in code (:mod:`tools.registry`) ∩ enabled in
the admin ∩ allowed for the user's groups, each built from its validated configuration.

A tool whose row says ``requires_confirmation`` is marked so: the run's loop then asks the
user to approve each of its calls before running it (:mod:`engine.approval`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction

from core import configcache
from core.errors import ApplicationError
from engine import Tool, ToolRegistry
from tools.mcp.services import (
    mcp_servers_for_user,
    mcp_tools_described_for_user,
    mcp_tools_for_servers,
)
from tools.models import ToolConfig
from tools.models.config import config_schema_errors, secret_keys
from tools.redaction import redacting, secret_values
from tools.registry import ToolContext, ToolSpec, all_specs, get_spec
from tools.selectors import toolconfigs_for_user

__all__ = [
    "ToolRows",
    "tool_rows_for_user",
    "toolconfig_sync",
    "toolconfig_update",
    "tools_available_for_user",
    "tools_for_user",
]

logger = logging.getLogger(__name__)

_UNSET: Any = object()


def toolconfig_sync() -> int:
    """Create a row (with the spec's defaults) for every registered tool lacking one."""
    existing = set(ToolConfig.objects.values_list("name", flat=True))
    new = [
        ToolConfig(
            name=spec.name,
            enabled=spec.enabled_by_default,
            requires_confirmation=spec.requires_confirmation,
        )
        for spec in all_specs()
        if spec.name not in existing
    ]
    if new:
        ToolConfig.objects.bulk_create(new, ignore_conflicts=True)
        configcache.bump()  # bulk_create sends no signals; runs cache their tool rows
        logger.info("tool configurations created for: %s", ", ".join(t.name for t in new))
    return len(new)


def toolconfig_update(
    *,
    toolconfig: ToolConfig,
    enabled: bool | None = None,
    description_override: str | None = None,
    config: Mapping[str, Any] | None = None,
    secrets: Mapping[str, Any] | None = None,
    requires_confirmation: bool | None = None,
    allowed_groups: Any = _UNSET,
) -> ToolConfig:
    """Change a tool's settings; the configuration is validated against its schema.

    ``secrets`` are merged into the stored ones (a value of ``None`` or ``""`` removes
    that key). Raises :class:`ApplicationError` on an invalid configuration.
    """
    if enabled is not None:
        toolconfig.enabled = enabled
    if description_override is not None:
        toolconfig.description_override = description_override
    if requires_confirmation is not None:
        toolconfig.requires_confirmation = requires_confirmation
    if config is not None:
        toolconfig.config = dict(config)
    if secrets is not None:
        toolconfig.secrets_dict = {**toolconfig.secrets_dict, **dict(secrets)}
    spec = toolconfig.spec
    if spec is not None:
        leaked = sorted(set(toolconfig.config or {}) & set(secret_keys(spec)))
        if leaked:
            raise ApplicationError(
                f"Secret settings must be passed as secrets: {', '.join(leaked)}.",
                code="invalid_config",
            )
        problems = config_schema_errors(spec, toolconfig.effective_config())
        if problems:
            raise ApplicationError(
                f"Invalid configuration for {toolconfig.name}: {'; '.join(problems)}",
                code="invalid_config",
                extra={"config": problems},
            )
    with transaction.atomic():
        toolconfig.save()
        if allowed_groups is not _UNSET:
            toolconfig.allowed_groups.set(allowed_groups or [])
    return toolconfig


def _configured(tool: Tool, row: ToolConfig, *, single: bool) -> Tool:
    override = row.description_override.strip()
    # A spec that builds several tools (an MCP server) only gets its own-named tool renamed.
    if override and (single or tool.name == row.name):
        tool = dataclasses.replace(tool, description=override)
    # The admin's flag is the one that counts (the spec's is only the row's default).
    if tool.requires_confirmation != row.requires_confirmation:
        tool = dataclasses.replace(tool, requires_confirmation=row.requires_confirmation)
    return tool


@dataclasses.dataclass(frozen=True)
class ToolRows:
    """The configuration rows a user's runs are built from (cacheable: no run context)."""

    tool_configs: tuple[ToolConfig, ...]
    mcp_servers: tuple[Any, ...]


def tool_rows_for_user(*, user: Any) -> ToolRows:
    """The enabled tool configurations and MCP servers ``user`` may use (sync ORM)."""
    toolconfig_sync()
    return ToolRows(
        tool_configs=tuple(toolconfigs_for_user(user=user)),
        mcp_servers=tuple(mcp_servers_for_user(user=user)),
    )


def tools_for_user(
    *, user: Any, context: ToolContext, rows: ToolRows | None = None
) -> ToolRegistry:
    """The engine registry for one run: registered ∩ enabled ∩ allowed for ``user``.

    ``rows`` (from :func:`tool_rows_for_user`, possibly cached) saves the queries. A tool
    whose configuration is invalid, or whose build fails, is left out (and logged) rather
    than failing the run. Synchronous (ORM): wrap in ``sync_to_async``.
    """
    rows = rows if rows is not None else tool_rows_for_user(user=user)
    by_name = {row.name: row for row in rows.tool_configs}
    registry = ToolRegistry()
    for spec in all_specs():
        row = by_name.get(spec.name)
        if row is None:
            continue
        config = row.effective_config()
        problems = config_schema_errors(spec, config)
        if problems:
            logger.warning("tool %s skipped: invalid configuration: %s", spec.name, problems)
            continue
        if why := tool_unavailable_reason(spec, config):
            logger.debug("tool %s not offered: %s", spec.name, why)
            continue
        try:
            built = spec.build(config, context)
        except Exception:
            logger.exception("tool %s skipped: building it failed", spec.name)
            continue
        tools = [built] if isinstance(built, Tool) else list(built)
        for tool in tools:
            tool = _configured(tool, row, single=len(tools) == 1)
            if tool.name in registry:
                logger.warning("tool %s skipped: the name is already taken", tool.name)
                continue
            registry.register(tool)
    _add_mcp_tools(registry, servers=rows.mcp_servers, context=context)
    return _redacted(registry, rows)


def _redacted(registry: ToolRegistry, rows: ToolRows) -> ToolRegistry:
    """The registry's tools, their results redacted of every secret the run's tools hold
    (tools/redaction.py): a service reflecting a header must not hand it to the model."""
    held: list[Any] = [row.secrets_dict for row in rows.tool_configs]
    held += [(server.env_dict, server.headers_dict) for server in rows.mcp_servers]
    secrets = secret_values(held)
    if not secrets:
        return registry
    return ToolRegistry(redacting(tool, secrets) for tool in registry)


def _add_mcp_tools(registry: ToolRegistry, *, servers: Any, context: ToolContext) -> None:
    """Tools of the MCP servers this user may use, as ``<server>__<tool>``."""
    for tool in mcp_tools_for_servers(servers, context=context):
        if tool.name in registry:
            logger.warning("MCP tool %s skipped: the name is already taken", tool.name)
            continue
        registry.register(tool)


def tool_unavailable_reason(spec: ToolSpec, config: dict[str, Any]) -> str:
    """Why ``spec`` cannot work with ``config`` ("" when it can)."""
    if spec.unavailable is None:
        return ""
    try:
        return spec.unavailable(config)
    except Exception as exc:  # a broken check must not hide every other tool
        logger.exception("tool %s: checking its configuration failed", spec.name)
        return f"its configuration could not be checked ({type(exc).__name__})"


def tools_available_for_user(*, user: Any) -> list[dict[str, Any]]:
    """Name, description, confirmation flag and MCP server (None for the site's own) of
    each tool the user may use (for UI/API).

    Lists tools without building them (no connection to MCP servers: their cached
    listings).
    """
    toolconfig_sync()
    available = []
    for row in toolconfigs_for_user(user=user):
        spec = get_spec(row.name)
        if spec is None or tool_unavailable_reason(spec, row.effective_config()):
            continue
        available.append(
            {
                "name": row.name,
                "description": row.description_override.strip() or spec.description,
                "requires_confirmation": row.requires_confirmation,
                "server": None,
            }
        )
    return available + mcp_tools_described_for_user(user=user)
