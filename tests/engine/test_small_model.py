"""Models marked small (the bundled 135M model): a short prompt with worked examples,
actions without a reasoning field, and the result of a call that worked as the answer."""

from __future__ import annotations

import json
from typing import Any

from engine.agent import ReActAgent
from engine.events import AnswerDelta
from engine.interrupts import InterruptQueue
from engine.tools import Tool, ToolExample, ToolRegistry, ToolResult
from testing.scripted_llm import ScriptedLLM

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
    examples=(ToolExample(request="Twice 21?", arguments={"number": 21}),),
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
    assert system.index("Twice 21?") < system.index("User: What is the largest planet")
    assert "- echo: Say it back." in system  # listed, though it has no example
    assert '"number": what to double' in system
    assert "JSON schema" not in system  # the grammar carries the schema, not the prompt


async def test_a_small_models_actions_have_no_reasoning_field() -> None:
    llm = ScriptedLLM([answer("Paris.")], abilities=LLAMACPP)

    await small_agent(llm).run("Capital of France?")

    schema = schema_of(llm.calls[0])
    assert "reasoning" not in schema["properties"] and schema["required"] == ["type"]
    assert all("reasoning" not in variant["properties"] for variant in schema["anyOf"])


async def test_the_result_of_a_call_that_worked_is_the_answer() -> None:
    """A 135M model garbles what a tool told it ("23:10" for 21:19): it does not get to
    retell it."""
    llm = ScriptedLLM([call("double", number=4)], abilities=LLAMACPP)
    events: list[Any] = []

    async def record(event: Any) -> None:
        events.append(event)

    agent = ReActAgent(llm, ToolRegistry([DOUBLE, NO_EXAMPLE]), small_model=True, on_event=record)
    result = await agent.run("Twice 4?")

    assert result.answer == "8" and len(llm.calls) == 1
    assert "".join(e.content for e in events if isinstance(e, AnswerDelta)) == "8"


async def test_a_failed_call_is_the_answer_in_plain_words() -> None:
    """Given another turn, a 135M model "fixes" an error by calling some other tool and
    answers with that: the failure is said instead."""
    llm = ScriptedLLM([call("double", number=-1)], abilities=LLAMACPP)

    result = await small_agent(llm).run("Twice minus one?")

    assert len(llm.calls) == 1 and result.status == "succeeded"
    assert result.answer == "The double tool could not answer this: only positive numbers"


async def test_a_follow_up_sent_during_the_call_gets_a_model_turn() -> None:
    queue = InterruptQueue()

    def double_and_interrupt(number: int) -> ToolResult:
        queue.put("and add one")
        return ToolResult(str(number * 2))

    tool = Tool("double", "Double a number.", DOUBLE.parameters, double_and_interrupt)
    llm = ScriptedLLM([call("double", number=4), answer("9.")], abilities=LLAMACPP)
    agent = ReActAgent(llm, ToolRegistry([tool]), small_model=True, interrupt_queue=queue)

    result = await agent.run("Twice 4?")

    assert result.answer == "9." and "and add one" in llm.calls[1]["messages"][-1].content


async def test_other_models_keep_the_full_prompt_and_may_chain_calls() -> None:
    script = [call("double", number=4), call("double", number=8), answer("16.")]
    llm = ScriptedLLM(script, abilities=LLAMACPP)

    result = await ReActAgent(llm, ToolRegistry([DOUBLE, NO_EXAMPLE])).run("Twice twice 4?")

    assert result.answer == "16." and len(result.steps) == 2
    assert offered_tools(llm.calls[1]) == ["double", "echo"]
    assert "Twice 21?" not in llm.calls[0]["messages"][0].content
    assert "reasoning" in schema_of(llm.calls[0])["required"]
