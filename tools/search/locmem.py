"""A recording backend for tests: answers from ``config["results"]``, remembers queries."""

from __future__ import annotations

from typing import Any, ClassVar

from tools.search.base import BaseSearchBackend, SearchHit, SearchResponse

__all__ = ["SearchBackend"]


class SearchBackend(BaseSearchBackend):
    name = "locmem"
    queries: ClassVar[list[dict[str, Any]]] = []  # every call, across instances (like mail.outbox)

    def missing_configuration(self) -> str | None:
        return None

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        type(self).queries.append({"query": query, "max_results": max_results})
        hits = [SearchHit(**hit) for hit in (self.config.get("results") or [])[:max_results]]
        return SearchResponse(query, str(self.config.get("answer") or ""), hits)
