"""ModelRegistry: names, roles and the default model."""

from __future__ import annotations

import pytest

from engine.llm.base import ChatResponse, default_abilities
from engine.llm.registry import ModelRegistry


class FakeLLM:
    def __init__(self, label: str) -> None:
        self.label = label
        self.abilities = default_abilities()

    async def chat(self, messages, **kwargs) -> ChatResponse:  # pragma: no cover - unused
        return ChatResponse(content=self.label)

    async def stream_chat(self, messages, **opts):  # pragma: no cover - unused
        yield ChatResponse(content=self.label)


@pytest.fixture
def models() -> dict[str, FakeLLM]:
    return {name: FakeLLM(name) for name in ("main", "fast", "thinker", "other")}


def test_register_and_get(models):
    registry = ModelRegistry()
    registry.register("main", models["main"])
    assert registry.get("main") is models["main"]
    assert "main" in registry
    assert "nope" not in registry
    assert len(registry) == 1
    assert registry.names() == ["main"]


def test_duplicate_name_is_rejected(models):
    registry = ModelRegistry()
    registry.register("main", models["main"])
    with pytest.raises(ValueError, match="main"):
        registry.register("main", models["other"])
    assert registry.get("main") is models["main"]


def test_unknown_name_raises_key_error_listing_known_models(models):
    registry = ModelRegistry()
    registry.register("main", models["main"])
    registry.register("fast", models["fast"])
    with pytest.raises(KeyError, match=r"unknown model 'gpt-9'.*main, fast"):
        registry.get("gpt-9")


def test_default_is_the_first_registered_unless_flagged(models):
    registry = ModelRegistry()
    registry.register("main", models["main"])
    registry.register("fast", models["fast"])
    assert registry.get_default() is models["main"]
    registry.register("thinker", models["thinker"], default=True)
    assert registry.get_default() is models["thinker"]


def test_latest_explicit_default_wins(models):
    registry = ModelRegistry()
    registry.register("main", models["main"], default=True)
    registry.register("other", models["other"], default=True)
    assert registry.get_default() is models["other"]


def test_empty_registry_has_no_default():
    registry = ModelRegistry()
    with pytest.raises(LookupError):
        registry.get_default()
    with pytest.raises(LookupError):
        registry.get_by_role("fast")
    assert len(registry) == 0


def test_get_by_role_picks_the_first_registered_with_that_role(models):
    registry = ModelRegistry()
    registry.register("main", models["main"], default=True)
    registry.register("fast", models["fast"], roles=("fast",))
    registry.register("other", models["other"], roles=["fast", "reasoning"])
    registry.register("thinker", models["thinker"], roles=("reasoning",))
    assert registry.get_by_role("fast") is models["fast"]
    assert registry.get_by_role("reasoning") is models["other"]
    assert registry.roles("other") == ("fast", "reasoning")


def test_get_by_role_falls_back_to_the_default(models):
    registry = ModelRegistry()
    registry.register("fast", models["fast"], roles=("fast",))
    registry.register("main", models["main"], default=True)
    assert registry.get_by_role("reasoning") is models["main"]
    assert registry.get_by_role(None) is models["main"]
    assert registry.get_by_role("") is models["main"]


def test_names_keep_registration_order(models):
    registry = ModelRegistry()
    for name in ("thinker", "main", "fast"):
        registry.register(name, models[name])
    assert registry.names() == ["thinker", "main", "fast"]
    assert list(registry) == ["thinker", "main", "fast"]
    assert "thinker" in repr(registry)
