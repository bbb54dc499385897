"""Web search backends (one module each) and the lookup by name used by ``web_search``."""

from __future__ import annotations

import importlib
from typing import Any

from tools.search.base import BaseSearchBackend, SearchError, SearchHit, SearchResponse

__all__ = [
    "BACKENDS",
    "BaseSearchBackend",
    "SearchError",
    "SearchHit",
    "SearchResponse",
    "get_backend",
]

BACKENDS: dict[str, str] = {
    "searxng": "tools.search.searxng",
    "metaso": "tools.search.metaso",
    "tavily": "tools.search.tavily",
    "brave": "tools.search.brave",
    "locmem": "tools.search.locmem",
}


def get_backend(name: str, config: dict[str, Any]) -> BaseSearchBackend:
    """An instance of the backend called ``name``; :class:`SearchError` for unknown names."""
    try:
        module = importlib.import_module(BACKENDS[name])
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise SearchError(f"unknown search backend '{name}' (known: {known})") from None
    return module.SearchBackend(config)
