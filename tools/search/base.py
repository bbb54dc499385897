"""The search backend interface: one small class per provider, chosen in the tool config.

Shaped like Django's pluggable backends: :class:`BaseSearchBackend` holds the shared
plumbing (config, HTTP client, formatting), each module in this package implements
``search()`` for one provider, and ``locmem`` records calls for tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from django.utils.translation import gettext as _

__all__ = ["BaseSearchBackend", "SearchError", "SearchHit", "SearchResponse"]

DEFAULT_TIMEOUT = 15.0
SNIPPET_CHARS = 400


class SearchError(Exception):
    """The provider failed or is misconfigured; the message is shown to the model."""


@dataclass
class SearchHit:
    title: str
    url: str
    snippet: str = ""


@dataclass
class SearchResponse:
    query: str
    answer: str = ""  # a provider's direct answer or summary, when it has one
    hits: list[SearchHit] = field(default_factory=list)

    def to_text(self) -> str:
        if not self.answer and not self.hits:
            return f"No results for '{self.query}'."
        lines = [f"Search results for '{self.query}':"]
        if self.answer:
            lines += ["", f"Answer: {self.answer}"]
        for n, hit in enumerate(self.hits, 1):
            snippet = " ".join(hit.snippet.split())[:SNIPPET_CHARS]
            lines += ["", f"{n}. {hit.title or hit.url}", f"   {hit.url}"]
            if snippet:
                lines.append(f"   {snippet}")
        return "\n".join(lines)


class BaseSearchBackend:
    """Subclasses set ``name`` and ``default_base_url`` and implement :meth:`search`."""

    name = "base"
    default_base_url = ""
    needs_api_key = False

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.api_key = str(config.get("api_key") or "").strip()
        self.base_url = str(config.get("base_url") or self.default_base_url).rstrip("/")
        self.timeout = float(config.get("timeout") or DEFAULT_TIMEOUT)

    def missing_configuration(self) -> str | None:
        """A message naming what the admin must set, or None when ready."""
        if self.needs_api_key and not self.api_key:
            message = _("the %(name)s backend needs an API key (tool config 'api_key')")
            return message % {"name": self.name}
        if not self.base_url:
            message = _("the %(name)s backend needs a base URL (tool config 'base_url')")
            return message % {"name": self.name}
        return None

    async def search(self, query: str, *, max_results: int) -> SearchResponse:
        raise NotImplementedError

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One JSON request to the provider, with errors turned into :class:`SearchError`."""
        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as client:
                response = await client.request(method, f"{self.base_url}{path}", **kwargs)
        except httpx.TimeoutException:
            raise SearchError(f"{self.name} did not answer within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise SearchError(f"could not reach {self.name}: {exc or type(exc).__name__}") from None
        if response.status_code in (401, 403):
            raise SearchError(f"{self.name} refused the API key (HTTP {response.status_code})")
        if response.status_code == 429:
            raise SearchError(f"{self.name} rate limit reached (HTTP 429); try again later")
        if response.status_code >= 400:
            raise SearchError(f"{self.name} returned HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise SearchError(f"{self.name} returned a response that is not JSON") from None
