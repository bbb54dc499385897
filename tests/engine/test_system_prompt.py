"""A system prompt given as a function is asked again before every LLM call of a run,
in native and JSON mode and in a plan's steps: its changing part (the time of day, say)
is current at each call, while the engine's own rules around it stay."""

from __future__ import annotations

import itertools
import json
from typing import Any

from engine.agent import ReActAgent
from engine.tools import ToolRegistry, tool
from testing.scripted_llm import ScriptedLLM


@tool()
async def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


def clock() -> Any:
    """A system prompt whose time moves one minute each time it is asked."""
    minutes = itertools.count()

    def prompt() -> str:
        return f"You are Bob. The time is 09:{next(minutes):02d}."

    return prompt


def system_texts(llm: ScriptedLLM) -> list[str]:
    return [call["messages"][0].content for call in llm.calls]


async def test_native_mode_asks_again_before_each_call() -> None:
    llm = ScriptedLLM(
        [{"tool_calls": [{"name": "lookup", "arguments": {"term": "tide"}}]}, "High at noon."],
        abilities={"tool_call": True},
    )
    agent = ReActAgent(llm, ToolRegistry([lookup]), system_prompt=clock())
    result = await agent.run("When is high tide?")
    assert result.status == "succeeded" and result.iterations == 2
    first, second = system_texts(llm)
    assert "The time is 09:" in first and "The time is 09:" in second
    assert first != second  # the time moved between the two iterations
    assert first.split("You are Bob.")[0] == second.split("You are Bob.")[0]  # rules kept
    assert [m.role for m in llm.calls[1]["messages"]].count("system") == 1


async def test_json_mode_keeps_its_catalog_around_the_current_text() -> None:
    action = {
        "type": "tool_call",
        "reasoning": "r",
        "tool_name": "lookup",
        "tool_args": {"term": "x"},
    }
    answer = {"type": "final_answer", "reasoning": "r", "answer": "done"}
    llm = ScriptedLLM([json.dumps(action), json.dumps(answer)])
    agent = ReActAgent(llm, ToolRegistry([lookup]), system_prompt=clock())
    await agent.run("Look x up")
    first, second = system_texts(llm)
    assert first != second
    assert all("lookup" in text and "The time is 09:" in text for text in (first, second))


async def test_a_text_system_prompt_is_sent_unchanged() -> None:
    llm = ScriptedLLM(
        [{"tool_calls": [{"name": "lookup", "arguments": {"term": "a"}}]}, "ok"],
        abilities={"tool_call": True},
    )
    await ReActAgent(llm, ToolRegistry([lookup]), system_prompt="You are Bob.").run("q")
    first, second = system_texts(llm)
    assert first == second and "You are Bob." in first
