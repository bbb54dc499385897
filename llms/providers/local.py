"""The ``local`` kind: the bundled SmolLM2 model on a llama.cpp server the site supervises.

The provider row's base URL and API key are ignored: the server runs on a loopback port
chosen at start (see :mod:`llms.local_server`) with a key of its own. The engine talks to
it through the same :class:`~engine.llm.openai.OpenAICompatibleLLM` as every other
provider; :class:`LocalServerLLM` only makes sure the server runs before each attempt, so
a server that died is restarted (on a new port) even between the retries of one call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from engine.llm.base import ChatDelta, ChatResponse, LLMError
from engine.llm.openai import OpenAICompatibleLLM
from llms.connections import RuntimeConnections
from llms.local_server import LocalModelError, LocalServer, ServerInfo, get_server
from llms.providers import ModelRow, ProviderRow

__all__ = ["DEFAULT_MAX_TOKENS", "LABEL", "PLACEHOLDER_BASE_URL", "LocalServerLLM", "build_llm"]

LABEL = gettext_lazy("Local model (bundled llama.cpp server)")
# What the provider row stores; the real URL is known once the server runs.
PLACEHOLDER_BASE_URL = "http://127.0.0.1/v1"
DEFAULT_MAX_RETRIES = 1
# A tiny model can ramble until the context is full: cap every reply unless told otherwise.
DEFAULT_MAX_TOKENS = 1024
# Greedy decoding: llama.cpp's default temperature (0.8) sends a 135M model's tool calls
# and answers wandering, and the same question gets a different answer each time.
DEFAULT_TEMPERATURE = 0.0


class LocalServerLLM(OpenAICompatibleLLM):
    """An OpenAI-compatible client whose server is started (or restarted) on demand."""

    def __init__(self, server: LocalServer, model: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(PLACEHOLDER_BASE_URL, None, model, *args, **kwargs)
        self.server = server

    def __repr__(self) -> str:
        return f"LocalServerLLM(model={self.model!r}, server={self.server!r})"

    async def ensure_server(self) -> ServerInfo:
        """Start or adopt the server (in a thread: it may take seconds) and point at it."""
        try:
            info = await asyncio.to_thread(self.server.ensure)
        except LocalModelError as exc:
            raise LLMError(
                _("The local model is not available: %(reason)s") % {"reason": exc}
            ) from None
        if info.api_key != self._api_key and self._client is not None:
            await self.aclose()  # the key is baked into the client's headers
        self.base_url = info.base_url
        self._api_key = info.api_key or None
        return info

    async def _chat_once(self, payload: dict[str, Any]) -> ChatResponse:
        await self.ensure_server()
        return await super()._chat_once(payload)

    async def _stream_once(self, payload: dict[str, Any]) -> AsyncIterator[ChatDelta]:
        await self.ensure_server()
        async with contextlib.aclosing(super()._stream_once(payload)) as deltas:
            async for delta in deltas:
                yield delta


def build_llm(
    provider: ProviderRow,
    model: ModelRow,
    *,
    max_retries: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> LocalServerLLM:
    """No network here: the server starts on the first request."""
    return LocalServerLLM(
        get_server(),
        model.model_id,
        dict(model.abilities or {}),
        timeout=float(provider.timeout),
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
        default_params={
            "max_tokens": model.max_output_tokens or DEFAULT_MAX_TOKENS,
            "temperature": DEFAULT_TEMPERATURE,
            **(params or {}),
        },
        transport=RuntimeConnections(),
    )
