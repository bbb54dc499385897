"""Tavily search API (an answer plus ranked results, built for LLM agents)."""

from __future__ import annotations

from tools.search.base import BaseSearchBackend, SearchHit, SearchResponse

__all__ = ["SearchBackend"]


class SearchBackend(BaseSearchBackend):
    name = "tavily"
    default_base_url = "https://api.tavily.com"
    needs_api_key = True

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        data = await self._request(
            "POST",
            "/search",
            headers={"Authorization": f"Bearer {self.api_key}"},
            json={"query": query, "max_results": max_results, "include_answer": True},
        )
        hits = [
            SearchHit(
                str(r.get("title") or ""), str(r.get("url") or ""), str(r.get("content") or "")
            )
            for r in (data.get("results") or [])[:max_results]
            if r.get("url")
        ]
        return SearchResponse(query, str(data.get("answer") or "").strip(), hits)
