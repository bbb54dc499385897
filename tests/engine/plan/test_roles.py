"""How plan mode finds a step's model: roles checked first, the chat model as fallback."""

from __future__ import annotations

from engine.llm.registry import ModelRegistry
from engine.plan.common import llm_for_role, model_name
from testing.scripted_llm import ScriptedLLM


def test_has_role_and_name_of() -> None:
    main, fast = ScriptedLLM(), ScriptedLLM()
    registry = ModelRegistry()
    registry.register("main", main, default=True)
    registry.register("fast-model", fast, roles=("fast",))

    assert registry.has_role("fast") and not registry.has_role("reasoning")
    assert not registry.has_role(None) and not registry.has_role("")
    assert registry.name_of(fast) == "fast-model" and registry.name_of(ScriptedLLM()) is None


def test_an_absent_role_means_the_conversations_model_not_the_registry_default() -> None:
    default, chat, fast = ScriptedLLM(), ScriptedLLM(), ScriptedLLM()
    registry = ModelRegistry()
    registry.register("default", default, default=True)
    registry.register("fast", fast, roles=("fast",))

    assert llm_for_role(registry, "fast", chat) is fast
    assert llm_for_role(registry, "reasoning", chat) is chat
    assert llm_for_role(registry, None, chat) is chat


def test_a_model_outside_the_registry_is_named_by_its_type() -> None:
    assert model_name(ModelRegistry(), ScriptedLLM()) == "ScriptedLLM"
