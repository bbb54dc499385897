"""``web_search``: search the web through the backend the admin picked (tools/search/).

Without a usable backend the tool is not offered to models at all (:func:`unavailable`:
a model offered a search that cannot work spends its steps on errors); the admin's tool
list says what is missing. If it is called anyway, it answers with the same reason.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from engine import Tool, ToolResult
from tools.registry import ToolContext, ToolSpec, register
from tools.search import BACKENDS, SearchError, get_backend

__all__ = ["web_search"]

DEFAULT_MAX_RESULTS = 5
MAX_RESULTS_LIMIT = 20


async def web_search(
    query: str, config: dict[str, Any], max_results: int | None = None
) -> ToolResult:
    name = str(config.get("backend") or "").strip()
    if not name:
        return ToolResult(
            "Error: web search is not configured (an admin must choose a backend: "
            f"{', '.join(b for b in BACKENDS if b != 'locmem')}).",
            is_error=True,
        )
    if not query.strip():
        return ToolResult("Error: the search query is empty.", is_error=True)
    limit = int(config.get("max_results") or DEFAULT_MAX_RESULTS)
    count = max(1, min(max_results or limit, MAX_RESULTS_LIMIT))
    try:
        backend = get_backend(name, config)
        missing = backend.missing_configuration()
        if missing:
            return ToolResult(f"Error: web search is not configured: {missing}.", is_error=True)
        response = await backend.search(query.strip(), max_results=count)
    except SearchError as exc:
        return ToolResult(f"Error: web search failed: {exc}", is_error=True)
    return ToolResult(response.to_text())


def unavailable(config: dict[str, Any]) -> str:
    """What the admin must set before searches can work ("" when nothing)."""
    name = str(config.get("backend") or "").strip()
    if not name:
        return _("no search backend is chosen")
    try:
        return get_backend(name, config).missing_configuration() or ""
    except SearchError as exc:
        return str(exc)


def build(config: dict[str, Any], context: ToolContext) -> list[Tool]:
    async def run(query: str, max_results: int | None = None) -> ToolResult:
        return await web_search(query, config, max_results)

    timeout = float(config.get("timeout") or 15.0)
    return [
        Tool(
            name="web_search",
            description=(
                "Search the web. Returns a short answer when the provider has one, then "
                "titles, URLs and snippets; read a page in full with web_fetch."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for"},
                    "max_results": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_RESULTS_LIMIT,
                        "description": f"How many results (default {DEFAULT_MAX_RESULTS})",
                    },
                },
                "required": ["query"],
            },
            func=run,
            timeout=timeout + 5,
        )
    ]


SPEC = register(
    ToolSpec(
        name="web_search",
        description="Web search through SearXNG, Metaso, Tavily or Brave.",
        build=build,
        config_schema={
            "type": "object",
            "properties": {
                "backend": {
                    "type": "string",
                    "enum": ["", *BACKENDS],
                    "description": "searxng (self-hosted), metaso, tavily or brave.",
                },
                "base_url": {
                    "type": "string",
                    "description": "SearXNG: your instance URL. Others: optional API base URL "
                    "override (proxies).",
                },
                "api_key": {
                    "type": "string",
                    "x-secret": True,
                    "description": "API key for metaso, tavily or brave (stored encrypted).",
                },
                "max_results": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_RESULTS_LIMIT,
                    "default": DEFAULT_MAX_RESULTS,
                },
                "timeout": {"type": "number", "minimum": 1, "default": 15.0},
            },
        },
        default_config={"backend": "", "max_results": DEFAULT_MAX_RESULTS, "timeout": 15.0},
        unavailable=unavailable,
    )
)
