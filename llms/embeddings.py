"""Turning texts into vectors with the enabled :class:`~llms.models.EmbeddingModel`
(OpenAI's ``POST /embeddings`` wire format, which Ollama, llama.cpp, vLLM, LiteLLM and
OpenAI itself answer).

Synchronous on purpose: knowledge indexing runs in a worker thread or a Celery task, and a
search from the agent's tool runs in a database thread. Failures are an
:class:`EmbeddingError` whose message the document's owner or the agent may read (no
key, no URL, no response body that could echo a secret).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import httpx
from django.utils.translation import gettext as _
from django.views.decorators.debug import sensitive_variables

from llms.models import EmbeddingModel

__all__ = ["EmbeddingError", "Embedder", "active_embedder"]

CONNECT_RETRIES = 2


class EmbeddingError(Exception):
    """The embedding model did not give the vectors; the message is for users."""


@dataclass(frozen=True)
class Embedder:
    model: EmbeddingModel

    @property
    def signature(self) -> str:
        return self.model.signature

    @sensitive_variables("headers")
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, sent ``batch_size`` at a time."""
        model, provider = self.model, self.model.provider
        headers = {"Content-Type": "application/json", **provider.extra_headers}
        if provider.api_key:
            headers["Authorization"] = f"Bearer {provider.api_key}"
        transport = httpx.HTTPTransport(retries=CONNECT_RETRIES)
        vectors: list[list[float]] = []
        with httpx.Client(
            base_url=provider.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=float(provider.timeout),
            transport=transport,
        ) as client:
            for start in range(0, len(texts), model.batch_size):
                batch = list(texts[start : start + model.batch_size])
                vectors += self._batch(client, batch)
        return vectors

    def _batch(self, client: httpx.Client, texts: list[str]) -> list[list[float]]:
        body: dict[str, object] = {"model": self.model.model_id, "input": texts}
        if self.model.dimensions:
            body["dimensions"] = self.model.dimensions
        try:
            response = client.post("embeddings", json=body)
        except httpx.HTTPError as exc:
            raise EmbeddingError(
                _("The embedding model %(model)s did not answer (%(error)s).")
                % {"model": self.model.model_id, "error": type(exc).__name__}
            ) from None
        if response.status_code != 200:
            raise EmbeddingError(
                _("The embedding model %(model)s answered HTTP %(status)s.")
                % {"model": self.model.model_id, "status": response.status_code}
            )
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = [[float(value) for value in item["embedding"]] for item in data]
        except (ValueError, KeyError, TypeError):
            raise EmbeddingError(
                _(
                    "The embedding model %(model)s answered something that is not a list of "
                    "embeddings."
                )
                % {"model": self.model.model_id}
            ) from None
        if len(vectors) != len(texts):
            raise EmbeddingError(
                _("The embedding model %(model)s answered %(vectors)d vectors for %(texts)d texts.")
                % {"model": self.model.model_id, "vectors": len(vectors), "texts": len(texts)}
            )
        expected = self.model.dimensions or len(vectors[0])
        if any(len(vector) != expected for vector in vectors):
            raise EmbeddingError(
                _(
                    "The embedding model %(model)s answered vectors of another length than "
                    "%(expected)d: set its dimensions again in the admin."
                )
                % {"model": self.model.model_id, "expected": expected}
            )
        return vectors


def active_embedder() -> Embedder | None:
    """The enabled embedding model whose vector length is known, or None (full text only)."""
    model = (
        EmbeddingModel.objects.select_related("provider")
        .filter(enabled=True, dimensions__isnull=False)
        .first()
    )
    return Embedder(model) if model is not None else None
