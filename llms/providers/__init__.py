"""Provider kinds: which engine LLM class serves a :class:`llms.models.Provider` row.

Shaped like Django's pluggable backends: one module per kind, each exposing ``LABEL`` and
``build_llm(provider, model, *, max_retries=None) -> engine LLM``. Adding a kind (e.g. a
``local`` llama.cpp server managed by the site) is one module plus one line in
:data:`PROVIDER_KINDS`, or a call to :func:`register_kind` from that app's ``ready()``.
The model field's choices are a callable, so adding a kind needs no migration.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from django.utils.translation import gettext as _

from core.errors import ApplicationError

if TYPE_CHECKING:
    from engine import LLM

__all__ = [
    "PROVIDER_KINDS",
    "ModelRow",
    "ProviderBackend",
    "ProviderRow",
    "get_backend",
    "kind_choices",
    "register_kind",
]

PROVIDER_KINDS: dict[str, str] = {
    "openai": "llms.providers.openai",
    "local": "llms.providers.local",
}


class ProviderRow(Protocol):
    """What a backend reads of a :class:`llms.models.Provider` (the models import this
    package for the kind's choices, so backends name the row by its shape)."""

    base_url: str
    api_key: str
    timeout: float

    @property
    def extra_headers(self) -> dict[str, str]: ...


class ModelRow(Protocol):
    """What a backend reads of a :class:`llms.models.LLMModel`."""

    model_id: str
    abilities: dict[str, Any] | None
    max_output_tokens: int | None


class ProviderBackend(Protocol):
    """What a provider-kind module offers (checked by duck typing, not inheritance)."""

    LABEL: str

    def build_llm(
        self,
        provider: ProviderRow,
        model: ModelRow,
        *,
        max_retries: int | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> LLM: ...


def register_kind(kind: str, module_path: str) -> None:
    """Make ``kind`` available (idempotent); ``module_path`` is imported on first use."""
    PROVIDER_KINDS[kind] = module_path


def get_backend(kind: str) -> ModuleType:
    try:
        path = PROVIDER_KINDS[kind]
    except KeyError:
        known = ", ".join(sorted(PROVIDER_KINDS))
        raise ApplicationError(
            _("Unknown provider kind %(kind)s (known: %(known)s).")
            % {"kind": repr(kind), "known": known},
            code="unknown_provider_kind",
        ) from None
    return importlib.import_module(path)


def kind_choices() -> list[tuple[str, Any]]:
    """Choices for ``Provider.kind``, evaluated lazily from the registry."""
    return [(kind, get_backend(kind).LABEL) for kind in PROVIDER_KINDS]
