"""Schema-constrained JSON mode: the action schema's variants and the loop breaker."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from engine.actions import ACTION_REASONING_MAX_CHARS, action_schema
from engine.agent import ReActAgent
from engine.tools import ToolRegistry, tool
from testing.scripted_llm import ScriptedLLM

LLAMACPP = {"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"}


@tool()
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny in {city}"


@tool()
def calculator(expression: str) -> str:
    """Evaluate arithmetic."""
    return "391"


TOOLS = ToolRegistry([get_weather, calculator])


def call(name: str, args: dict[str, Any]) -> str:
    return json.dumps({"type": "tool_call", "reasoning": "r", "tool_name": name, "tool_args": args})


def final(answer: str) -> str:
    return json.dumps({"type": "final_answer", "reasoning": "r", "answer": answer})


def test_flat_properties_keep_the_tool_enum():
    schema = action_schema(TOOLS)
    assert schema["type"] == "object"
    assert schema["properties"]["tool_name"]["enum"] == ["get_weather", "calculator"]
    assert schema["properties"]["type"]["enum"] == ["tool_call", "final_answer"]


def test_one_variant_per_tool_with_its_parameters_plus_the_final_answer():
    variants = action_schema(TOOLS)["anyOf"]
    weather, calc, answer = variants
    assert weather["properties"]["tool_name"] == {"const": "get_weather"}
    assert weather["properties"]["tool_args"] == get_weather.parameters
    assert weather["required"] == ["type", "reasoning", "tool_name", "tool_args"]
    assert calc["properties"]["tool_args"] == calculator.parameters
    assert answer["properties"]["type"] == {"const": "final_answer"}
    assert answer["required"] == ["type", "reasoning", "answer"]
    assert weather["properties"]["reasoning"]["maxLength"] == ACTION_REASONING_MAX_CHARS


@pytest.mark.parametrize(
    ("action", "valid"),
    [
        (json.loads(call("get_weather", {"city": "Paris"})), True),
        (json.loads(final("It is sunny.")), True),
        ({"type": "tool_call", "reasoning": "r"}, False),  # no tool named: the 0/7 failure
        (json.loads(call("get_weather", {})), False),  # required argument missing
        (json.loads(call("rm_rf", {"city": "x"})), False),  # not a listed tool
        ({"type": "final_answer", "reasoning": "r"}, False),  # no answer
        (
            {
                "type": "tool_call",
                "reasoning": "x" * 400,
                "tool_name": "calculator",
                "tool_args": {"expression": "1"},
            },
            False,
        ),  # fmt: skip
    ],
)
def test_schema_accepts_exactly_the_two_reply_shapes(action: dict[str, Any], valid: bool):
    validator = jsonschema.Draft202012Validator(action_schema(TOOLS))
    assert validator.is_valid(action) is valid


def test_names_only_leave_arguments_unconstrained():
    schema = action_schema(["a", "b"])
    assert [v["properties"].get("tool_args") for v in schema["anyOf"]] == [
        {"type": "object"},
        {"type": "object"},
        None,
    ]


def test_no_tools_means_only_a_final_answer():
    schema = action_schema(ToolRegistry())
    assert schema["properties"]["type"]["enum"] == ["final_answer"]
    assert len(schema["anyOf"]) == 1


async def test_a_repeated_call_removes_that_tool_from_the_next_turns_schema():
    llm = ScriptedLLM(
        [
            call("get_weather", {"city": "Paris"}),
            call("get_weather", {"city": "Paris"}),
            final("Sunny in Paris."),
        ],
        abilities=LLAMACPP,
    )
    result = await ReActAgent(llm, TOOLS, max_iterations=5).run("Weather in Paris?")

    assert result.stop_reason == "answer" and len(result.steps) == 2
    first, second, third = (c["response_format"]["schema"] for c in llm.calls)
    assert first == second == action_schema(TOOLS)
    assert third["properties"]["tool_name"]["enum"] == ["calculator"]
    assert [v["properties"].get("tool_name") for v in third["anyOf"]] == [
        {"const": "calculator"},
        None,
    ]


async def test_the_only_tool_repeated_leaves_only_the_final_answer():
    llm = ScriptedLLM(
        [call("get_weather", {"city": "Paris"})] * 2 + [final("Sunny.")], abilities=LLAMACPP
    )
    await ReActAgent(llm, ToolRegistry([get_weather]), max_iterations=5).run("Weather?")

    third = llm.calls[2]["response_format"]["schema"]
    assert third["properties"]["type"]["enum"] == ["final_answer"]


async def test_models_without_json_schema_are_not_steered():
    llm = ScriptedLLM(
        [call("get_weather", {"city": "Paris"})] * 2 + [final("Sunny.")],
        abilities={"json_mode": True},
    )
    await ReActAgent(llm, TOOLS, max_iterations=5).run("Weather?")

    assert [c["response_format"] for c in llm.calls] == [{"type": "json_object"}] * 3
