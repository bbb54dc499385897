"""Brave Search API (web results)."""

from __future__ import annotations

from tools.search.base import BaseSearchBackend, SearchHit, SearchResponse

__all__ = ["SearchBackend"]


class SearchBackend(BaseSearchBackend):
    name = "brave"
    default_base_url = "https://api.search.brave.com"
    needs_api_key = True

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        data = await self._request(
            "GET",
            "/res/v1/web/search",
            headers={"X-Subscription-Token": self.api_key, "Accept": "application/json"},
            params={"q": query, "count": max_results},
        )
        results = (data.get("web") or {}).get("results") or []
        hits = [
            SearchHit(
                str(r.get("title") or ""), str(r.get("url") or ""), str(r.get("description") or "")
            )
            for r in results[:max_results]
            if r.get("url")
        ]
        return SearchResponse(query, "", hits)
