"""Models marked small (the bundled 135M model): a short prompt with worked examples,
actions without a reasoning field, and the answer due after a call that worked."""

from __future__ import annotations

import json
from typing import Any

from engine.agent import ReActAgent
from engine.llm.scripted import ScriptedLLM
from engine.tools import Tool, ToolExample, ToolRegistry, ToolResult

LLAMACPP = {"json_mode": True, "json_schema": True, "json_schema_dialect": "llamacpp"}


def double(number: int) -> ToolResult:
    if number < 0:
        return ToolResult("Error: only positive numbers", is_error=True)
    return ToolResult(str(number * 2))


DOUBLE = Tool(
    name="double",
    description="Double a number.",
    parameters={
        "type": "object",
        "properties": {"number": {"type": "integer", "description": "what to double"}},
        "required": ["number"],
    },
    func=double,
    example=ToolExample(
        request="Twice 21?", arguments={"number": 21}, result="42", answer="Twice 21 is 42."
    ),
)
NO_EXAMPLE = Tool(
    name="echo",
    description="Say it back.",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    func=lambda text="": text,
)


def call(name: str, **args: Any) -> str:
    return json.dumps({"type": "tool_call", "tool_name": name, "tool_args": args})


def answer(text: str) -> str:
    return json.dumps({"type": "final_answer", "answer": text})


def small_agent(llm: ScriptedLLM) -> ReActAgent:
    return ReActAgent(llm, ToolRegistry([DOUBLE, NO_EXAMPLE]), small_model=True)


def schema_of(request: dict[str, Any]) -> dict[str, Any]:
    return request["response_format"]["schema"]


def offered_tools(request: dict[str, Any]) -> list[str]:
    return schema_of(request)["properties"].get("tool_name", {}).get("enum", [])


async def test_the_prompt_shows_worked_examples_of_the_tools_present() -> None:
    llm = ScriptedLLM([answer("Paris.")], abilities=LLAMACPP)

    await small_agent(llm).run("Capital of France?")

    system = llm.calls[0]["messages"][0].content
    assert "User: Twice 21?" in system
    assert '{"type": "tool_call", "tool_name": "double", "tool_args": {"number": 21}}' in system
    assert "Observation: 42" in system and '"answer": "Twice 21 is 42."' in system
    assert "- echo: Say it back." in system  # listed, though it has no example
    assert '"number": what to double' in system
    assert "JSON schema" not in system  # the grammar carries the schema, not the prompt


async def test_a_small_models_actions_have_no_reasoning_field() -> None:
    llm = ScriptedLLM([answer("Paris.")], abilities=LLAMACPP)

    await small_agent(llm).run("Capital of France?")

    schema = schema_of(llm.calls[0])
    assert "reasoning" not in schema["properties"] and schema["required"] == ["type"]
    assert all("reasoning" not in variant["properties"] for variant in schema["anyOf"])


async def test_a_call_that_worked_is_followed_by_the_answer() -> None:
    llm = ScriptedLLM([call("double", number=4), answer("Twice 4 is 8.")], abilities=LLAMACPP)

    result = await small_agent(llm).run("Twice 4?")

    assert result.answer == "Twice 4 is 8."
    assert offered_tools(llm.calls[0]) == ["double", "echo"]
    assert offered_tools(llm.calls[1]) == []  # the grammar allows only the answer
    assert schema_of(llm.calls[1])["properties"]["type"]["enum"] == ["final_answer"]


async def test_after_a_failed_call_the_tools_stay_offered() -> None:
    llm = ScriptedLLM(
        [call("double", number=-1), call("double", number=1), answer("2.")], abilities=LLAMACPP
    )

    result = await small_agent(llm).run("Twice minus one?")

    assert [s.error is None for s in result.steps] == [False, True]
    assert offered_tools(llm.calls[1]) == ["double", "echo"]
    assert offered_tools(llm.calls[2]) == []


async def test_other_models_keep_the_full_prompt_and_may_chain_calls() -> None:
    script = [call("double", number=4), call("double", number=8), answer("16.")]
    llm = ScriptedLLM(script, abilities=LLAMACPP)

    result = await ReActAgent(llm, ToolRegistry([DOUBLE, NO_EXAMPLE])).run("Twice twice 4?")

    assert result.answer == "16." and len(result.steps) == 2
    assert offered_tools(llm.calls[1]) == ["double", "echo"]
    assert "Twice 21?" not in llm.calls[0]["messages"][0].content
    assert "reasoning" in schema_of(llm.calls[0])["required"]
