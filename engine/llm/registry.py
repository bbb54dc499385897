"""Named LLMs with roles, so plan steps can ask for a ``fast`` or ``reasoning`` model.

The web layer fills one from database rows; the engine only asks by name, role or for
the default, and always gets a model when at least one is registered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from engine.llm.base import LLM

__all__ = ["ModelRegistry"]


class ModelRegistry:
    """Insertion-ordered name -> LLM map with roles and a default."""

    def __init__(self) -> None:
        self._models: dict[str, LLM] = {}
        self._roles: dict[str, tuple[str, ...]] = {}
        self._default: str | None = None

    def register(
        self, name: str, llm: LLM, roles: Iterable[str] = (), default: bool = False
    ) -> None:
        """Add ``llm`` as ``name``. A later ``default=True`` replaces an earlier one."""
        if name in self._models:
            raise ValueError(f"a model named {name!r} is already registered")
        self._models[name] = llm
        self._roles[name] = tuple(roles)
        if default:
            self._default = name

    def get(self, name: str) -> LLM:
        try:
            return self._models[name]
        except KeyError:
            known = ", ".join(self._models) or "none"
            raise KeyError(f"unknown model {name!r} (registered: {known})") from None

    def get_by_role(self, role: str | None) -> LLM:
        """The first model registered with ``role``, else the default."""
        if role:
            for name, roles in self._roles.items():
                if role in roles:
                    return self._models[name]
        return self.get_default()

    def get_default(self) -> LLM:
        """The model flagged default, else the first registered."""
        if self._default is not None:
            return self._models[self._default]
        if not self._models:
            raise LookupError("no LLM is registered")
        return next(iter(self._models.values()))

    def has_role(self, role: str | None) -> bool:
        """Whether a model was registered with ``role`` (``get_by_role`` falls back to the
        default, so callers that want their own fallback ask this first)."""
        return bool(role) and any(role in roles for roles in self._roles.values())

    def name_of(self, llm: LLM) -> str | None:
        """The name ``llm`` (this very object) was registered under, or None."""
        return next((name for name, model in self._models.items() if model is llm), None)

    def roles(self, name: str) -> tuple[str, ...]:
        self.get(name)
        return self._roles[name]

    def names(self) -> list[str]:
        return list(self._models)

    def __len__(self) -> int:
        return len(self._models)

    def __contains__(self, name: object) -> bool:
        return name in self._models

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._models))

    def __repr__(self) -> str:
        return f"ModelRegistry({self.names()!r}, default={self._default!r})"
