"""SearXNG (self-hosted metasearch) through its JSON API (``format=json`` must be enabled)."""

from __future__ import annotations

from tools.search.base import BaseSearchBackend, SearchHit, SearchResponse

__all__ = ["SearchBackend"]


class SearchBackend(BaseSearchBackend):
    name = "searxng"

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        data = await self._request("GET", "/search", params={"q": query, "format": "json"})
        answers = []
        for item in data.get("answers") or []:
            text = item.get("answer") if isinstance(item, dict) else item
            if text:
                answers.append(str(text))
        hits = [
            SearchHit(
                str(r.get("title") or ""), str(r.get("url") or ""), str(r.get("content") or "")
            )
            for r in (data.get("results") or [])[:max_results]
            if r.get("url")
        ]
        return SearchResponse(query, " ".join(answers), hits)
