"""Metaso (metaso.cn) search API.

The useful text comes in priority order: a direct answer when the API gives one, else the
first page's summary, else the top three snippets; the hit list follows as sources.
"""

from __future__ import annotations

from tools.search.base import BaseSearchBackend, SearchHit, SearchResponse

__all__ = ["SearchBackend", "metaso_answer"]


def metaso_answer(data: dict) -> str:
    """Direct answer, then the first page summary, then the top 3 snippets."""
    for key in ("answer", "ai_answer", "aiAnswer"):
        if str(data.get(key) or "").strip():
            return str(data[key]).strip()
    pages = data.get("webpages") or []
    if pages and str(pages[0].get("summary") or "").strip():
        return str(pages[0]["summary"]).strip()
    snippets = [str(p.get("snippet") or "").strip() for p in pages[:3]]
    return "\n".join(s for s in snippets if s)


class SearchBackend(BaseSearchBackend):
    name = "metaso"
    default_base_url = "https://metaso.cn"
    needs_api_key = True

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        data = await self._request(
            "POST",
            "/api/v1/search",
            headers={"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"},
            json={"q": query, "scope": "webpage", "includeSummary": True, "size": max_results},
        )
        hits = [
            SearchHit(
                str(p.get("title") or ""), str(p.get("link") or ""), str(p.get("snippet") or "")
            )
            for p in (data.get("webpages") or [])[:max_results]
            if p.get("link")
        ]
        return SearchResponse(query, metaso_answer(data), hits)
