"""Tool selection: trigger above 12 tools, cap at 6, and every fallback to the full set."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.agent import ReActAgent
from engine.events import AgentEvent, Phase
from engine.llm.base import UnavailableError
from engine.selection import (
    TOOL_SELECTION_MAX,
    TOOL_SELECTION_THRESHOLD,
    choose_tools,
    keyword_pick,
    select_tools,
)
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object"}


async def noop() -> str:
    return "ok"


def make_registry(count: int) -> ToolRegistry:
    return ToolRegistry(
        Tool(f"tool_{n:02d}", f"Generic helper number {n}", OBJECT, noop) for n in range(count)
    )


def picks(*names: Any) -> str:
    return json.dumps({"tools": list(names)})


def test_constants() -> None:
    assert (TOOL_SELECTION_THRESHOLD, TOOL_SELECTION_MAX) == (12, 6)


async def test_twelve_tools_need_no_selection() -> None:
    registry = make_registry(12)
    llm = ScriptedLLM([])
    events: list[AgentEvent] = []

    selected = await select_tools(llm, registry, "anything", on_event=events.append)

    assert selected is registry
    assert llm.calls == [] and events == []


async def test_thirteen_tools_trigger_one_structured_call() -> None:
    registry = make_registry(13)
    llm = ScriptedLLM([picks("tool_05", "tool_01", "tool_12")])
    events: list[AgentEvent] = []

    selected = await select_tools(llm, registry, "do things", on_event=events.append)

    assert selected.names() == ["tool_01", "tool_05", "tool_12"]  # registry order
    assert [e.to_dict() for e in events] == [{"phase": "selecting_tools", "total_tools": 13}]
    assert isinstance(events[0], Phase) and events[0].channel == "phase"
    [request] = llm.calls
    prompt = request["messages"][-1].content
    assert "- tool_00: Generic helper number 0" in prompt and "do things" in prompt
    assert "parameters" not in prompt  # compact catalog: no schemas


async def test_async_event_callback() -> None:
    seen: list[AgentEvent] = []

    async def collect(event: AgentEvent) -> None:
        seen.append(event)

    await select_tools(ScriptedLLM([picks("tool_00")]), make_registry(13), "q", on_event=collect)

    assert len(seen) == 1


async def test_extra_names_are_cut_to_the_max() -> None:
    registry = make_registry(20)
    names = [f"tool_{n:02d}" for n in (19, 3, 7, 11, 2, 15, 8, 1)]

    selected = await select_tools(ScriptedLLM([picks(*names)]), registry, "q")

    assert len(selected) == 6
    assert set(selected.names()) == {f"tool_{n:02d}" for n in (19, 3, 7, 11, 2, 15)}


async def test_custom_max_tools() -> None:
    selected = await select_tools(
        ScriptedLLM([picks("tool_01", "tool_02", "tool_03")]), make_registry(13), "q", max_tools=2
    )
    assert selected.names() == ["tool_01", "tool_02"]


async def test_unknown_and_duplicate_names_are_dropped() -> None:
    llm = ScriptedLLM([picks("ghost", "tool_04", "tool_04", " tool_06 ")])

    selected = await select_tools(llm, make_registry(13), "q")

    assert selected.names() == ["tool_04", "tool_06"]


@pytest.mark.parametrize(
    "replies",
    [
        [picks()],  # empty list
        ['{"tools": null}'],  # null
        [picks("ghost", "phantom")],  # all invalid
        ["no json", "still no json"],  # unparseable twice -> default
        [UnavailableError("down")],  # exception
        ['{"tools": "tool_01"}', '{"tools": 5}'],  # wrong type twice
    ],
)
async def test_every_failure_keeps_the_full_set(replies: list[Any]) -> None:
    registry = make_registry(13)

    selection = await choose_tools(ScriptedLLM(replies), registry, "q")

    assert selection.registry is registry and selection.method == "fallback"


async def test_exception_outside_the_structured_call_keeps_the_full_set() -> None:
    class Broken:
        @property
        def abilities(self) -> dict[str, Any]:
            raise RuntimeError("misconfigured provider")

    registry = make_registry(13)
    selection = await choose_tools(Broken(), registry, "q")  # type: ignore[arg-type]
    assert selection.registry is registry and selection.method == "fallback"


def _with_specialists() -> ToolRegistry:
    registry = make_registry(12)
    registry.register(
        Tool(
            "weather_forecast", "Weather forecast for a city: temperature, rain, wind", OBJECT, noop
        )
    )
    registry.register(Tool("stock_price", "Current stock price of a ticker", OBJECT, noop))
    return registry


async def test_keyword_shortcut_skips_the_llm() -> None:
    registry = _with_specialists()
    llm = ScriptedLLM([])

    selection = await choose_tools(llm, registry, "What is the weather forecast for Oslo, rain?")

    assert selection.method == "keyword"
    assert selection.registry.names() == ["weather_forecast"]
    assert llm.calls == []


def test_keyword_shortcut_needs_a_clear_winner() -> None:
    registry = _with_specialists()
    assert keyword_pick(registry, "weather") is None  # overlap of 1 only
    assert keyword_pick(registry, "helper number generic") is None  # ties everywhere
    assert keyword_pick(registry, "the and for with") is None  # stop words only


async def test_selection_usage_is_reported() -> None:
    selection = await choose_tools(ScriptedLLM([picks("tool_01")]), make_registry(13), "q")
    assert selection.method == "llm" and selection.usage.total_tokens == 15


async def test_agent_runs_selection_with_the_selection_llm() -> None:
    registry = make_registry(14)
    selector = ScriptedLLM([picks("tool_02", "tool_09")])
    main = ScriptedLLM(["done"], abilities={"tool_call": True})
    events: list[AgentEvent] = []

    result = await ReActAgent(main, registry, selection_llm=selector, on_event=events.append).run(
        "q"
    )

    assert [t["function"]["name"] for t in main.calls[0]["tools"]] == ["tool_02", "tool_09"]
    assert len(selector.calls) == 1
    assert isinstance(events[0], Phase)
    assert result.usage.total_tokens == 30  # selection + loop


async def test_agent_json_mode_catalog_lists_only_selected_tools() -> None:
    registry = make_registry(14)
    llm = ScriptedLLM(
        [picks("tool_03"), '{"type": "final_answer", "reasoning": "", "answer": "ok"}']
    )

    await ReActAgent(llm, registry).run("q")

    system = llm.calls[1]["messages"][0].content
    assert "- tool_03:" in system and "- tool_04:" not in system
