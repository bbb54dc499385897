"""The ``openai`` kind: any server speaking OpenAI's ``/chat/completions`` wire format."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext_lazy as _
from django.views.decorators.debug import sensitive_variables

from engine.llm.openai import OpenAICompatibleLLM
from llms.connections import RuntimeConnections
from llms.providers import ModelRow, ProviderRow

LABEL = _("OpenAI-compatible")
DEFAULT_MAX_RETRIES = 3


@sensitive_variables("api_key")
def build_llm(
    provider: ProviderRow,
    model: ModelRow,
    *,
    max_retries: int | None = None,
    params: Mapping[str, Any] | None = None,
) -> OpenAICompatibleLLM:
    api_key = provider.api_key or None
    return OpenAICompatibleLLM(
        provider.base_url,
        api_key,
        model.model_id,
        dict(model.abilities or {}),
        timeout=float(provider.timeout),
        max_retries=DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
        extra_headers=provider.extra_headers,
        default_params=params,
        transport=RuntimeConnections(),
    )
