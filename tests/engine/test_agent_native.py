"""Native mode end to end: tools in the request, parallel calls, message ordering."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from engine.agent import ReActAgent
from engine.events import IterationDone, IterationStart, ThinkingDone
from engine.tools import Tool, ToolRegistry, ToolResult, tool
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object"}


@tool()
async def weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


@tool()
def add(a: int, b: int) -> int:
    """Add two integers (sync)."""
    return a + b


def native_llm(*items: Any, **abilities: Any) -> ScriptedLLM:
    return ScriptedLLM(items, abilities={"tool_call": True, **abilities})


def call(name: str, call_id: str | None = None, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, **({"id": call_id} if call_id else {})}


def agent_for(llm: ScriptedLLM, *tools: Tool, **kwargs: Any) -> ReActAgent:
    return ReActAgent(llm, ToolRegistry(tools or (weather, add)), **kwargs)


async def test_answer_without_tool_calls() -> None:
    llm = native_llm("Hello!")
    agent = agent_for(llm)
    assert agent._native_mode_active

    result = await agent.run("hi")

    assert (result.answer, result.iterations, result.steps) == ("Hello!", 1, [])
    request = llm.calls[0]
    assert request["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in request["tools"]] == ["weather", "add"]
    assert "Observation" not in request["messages"][0].content


async def test_one_call_then_answer() -> None:
    llm = native_llm({"tool_calls": [call("weather", "c1", city="Oslo")]}, "It is sunny.")

    result = await agent_for(llm).run("weather in Oslo?")

    assert result.answer == "It is sunny."
    [step] = result.steps
    assert (step.tool_name, step.tool_args, step.observation) == (
        "weather",
        {"city": "Oslo"},
        "sunny in Oslo",
    )
    assert step.tool_call_id == "c1"
    sent = llm.calls[1]["messages"]
    assistant, tool_msg = sent[-2], sent[-1]
    assert assistant.role == "assistant" and assistant.content == ""
    assert assistant.to_openai()["content"] == ""
    assert [c.id for c in assistant.tool_calls] == ["c1"]
    assert (tool_msg.role, tool_msg.tool_call_id, tool_msg.content) == (
        "tool",
        "c1",
        "sunny in Oslo",
    )


async def test_several_turns_of_calls() -> None:
    llm = native_llm(
        {"tool_calls": [call("add", a=1, b=2)]},
        {"tool_calls": [call("add", a=3, b=3)]},
        "3 and 6",
    )

    result = await agent_for(llm).run("sums")

    assert [s.observation for s in result.steps] == ["3", "6"]
    assert [s.iteration for s in result.steps] == [1, 2]
    assert result.iterations == 3


async def test_parallel_calls_run_concurrently() -> None:
    arrived = 0
    all_here = asyncio.Event()

    async def meet(who: str) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 3:
            all_here.set()
        await all_here.wait()  # deadlocks unless all three run at the same time
        return f"met {who}"

    meet_tool = Tool("meet", "Wait for the others", {"type": "object"}, meet)
    llm = native_llm(
        {"tool_calls": [call("meet", who="a"), call("meet", who="b"), call("meet", who="c")]},
        "everyone met",
    )

    result = await asyncio.wait_for(agent_for(llm, meet_tool).run("meet"), timeout=5)

    assert result.answer == "everyone met"
    assert [s.observation for s in result.steps] == ["met a", "met b", "met c"]


async def test_tool_messages_follow_their_assistant_message_in_call_order() -> None:
    second_done = asyncio.Event()

    async def first(x: str) -> str:
        await second_done.wait()  # finishes after "second"
        return "first result"

    async def second(x: str) -> str:
        second_done.set()
        return "second result"

    tools = (Tool("first", "1", OBJECT, first), Tool("second", "2", OBJECT, second))
    events: list[Any] = []
    llm = native_llm(
        {
            "content": "let me check",
            "tool_calls": [call("first", "A", x="1"), call("second", "B", x="2")],
        },
        "done",
    )

    result = await agent_for(llm, *tools, on_event=events.append).run("q")

    sent = llm.calls[1]["messages"]
    tail = [(m.role, m.tool_call_id, m.content) for m in sent[2:]]
    assert tail == [
        ("assistant", None, "let me check"),
        ("tool", "A", "first result"),
        ("tool", "B", "second result"),
    ]
    assert [m.role for m in result.messages[2:]] == ["assistant", "tool", "tool", "assistant"]
    done = [e.tool_name for e in events if isinstance(e, IterationDone)]
    assert done == ["first", "second"]  # call order, although "second" finished first
    starts = [e for e in events if isinstance(e, IterationStart)]
    assert [(e.iteration, e.tool_name, e.tool_args) for e in starts] == [
        (1, "first", {"x": "1"}),
        (1, "second", {"x": "2"}),
    ]
    thinking = [e.reasoning for e in events if isinstance(e, ThinkingDone)]
    assert thinking == ["let me check", ""]


async def test_one_failure_never_cancels_the_others() -> None:
    failed = asyncio.Event()

    async def boom() -> str:
        try:
            raise RuntimeError("kaput")
        finally:
            failed.set()

    async def slow() -> str:
        await failed.wait()  # still running when its sibling has failed
        return "slow but fine"

    tools = (Tool("boom", "fails", OBJECT, boom), Tool("slow", "ok", OBJECT, slow))
    llm = native_llm({"tool_calls": [call("boom"), call("slow")]}, "partial")

    result = await agent_for(llm, *tools).run("q")

    boom_step, slow_step = result.steps
    assert boom_step.error == "Tool 'boom' failed: RuntimeError: kaput"
    assert boom_step.observation == "Error: Tool 'boom' failed: RuntimeError: kaput"
    assert (slow_step.error, slow_step.observation) == (None, "slow but fine")
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "Error: Tool 'boom' failed: RuntimeError: kaput",
        "slow but fine",
    ]


async def test_error_paths_become_error_observations() -> None:
    never = asyncio.Event()

    async def hang() -> str:
        await never.wait()
        return "never"

    async def reports_error() -> ToolResult:
        return ToolResult("Error: quota exceeded", is_error=True)  # prefixed, as tools do

    tools = (
        weather,
        Tool("hang", "hangs", OBJECT, hang, timeout=0.01),
        Tool("soft", "soft error", OBJECT, reports_error),
    )
    llm = native_llm(
        {
            "tool_calls": [
                call("missing"),
                call("weather", town="Oslo"),
                call("hang"),
                call("soft"),
            ]
        },
        "handled",
    )

    result = await agent_for(llm, *tools).run("q")

    errors = [s.error for s in result.steps]
    assert errors[0] == "Unknown tool 'missing'. Available tools: weather, hang, soft"
    assert errors[1].startswith("Invalid arguments for tool 'weather'") and "city" in errors[1]
    assert errors[2] == "Tool 'hang' timed out after 0.01 s"
    assert errors[3] == "quota exceeded"
    assert all(s.observation == f"Error: {s.error}" for s in result.steps)  # never doubled
    assert result.answer == "handled"


async def test_agent_tool_timeout_caps_slow_tools() -> None:
    never = asyncio.Event()

    async def hang() -> str:
        await never.wait()
        return "never"

    llm = native_llm({"tool_calls": [call("hang")]}, "ok")

    result = await agent_for(llm, Tool("hang", "h", OBJECT, hang), tool_timeout=0.01).run("q")

    assert result.steps[0].error == "Tool 'hang' timed out after 0.01 s"


async def test_sync_tools_run_in_a_worker_thread() -> None:
    seen: list[str] = []

    def where() -> str:
        seen.append(threading.current_thread().name)
        return "ok"

    llm = native_llm({"tool_calls": [call("where")]}, "done")

    await agent_for(llm, Tool("where", "w", OBJECT, where)).run("q")

    assert seen and seen[0] != threading.main_thread().name


async def test_reasoning_content_and_missing_ids() -> None:
    events: list[Any] = []
    llm = native_llm(
        {
            "tool_calls": [call("add", a=1, b=1), call("add", a=2, b=2)],
            "reasoning_content": "need sums",
        },
        {"content": "2 and 4", "reasoning_content": "easy"},
    )
    llm.script[0] = _without_ids(llm.script[0])

    result = await agent_for(llm, on_event=events.append).run("q")

    assistant = result.messages[2]
    ids = [c.id for c in assistant.tool_calls]
    assert len(set(ids)) == 2 and all(ids)
    assert [m.tool_call_id for m in result.messages[3:5]] == ids
    assert assistant.reasoning == "need sums"
    assert [e.reasoning for e in events if isinstance(e, ThinkingDone)] == ["need sums", "easy"]


def _without_ids(item: dict[str, Any]) -> Any:
    """A reply whose tool calls all carry the same empty id, as some servers send."""
    from testing.scripted_llm import to_response

    response = to_response(item)
    response.tool_calls = [type(c)("", c.name, c.arguments) for c in response.tool_calls]
    return response


async def test_without_tool_call_ability_the_agent_uses_json_mode() -> None:
    llm = ScriptedLLM(['{"type": "final_answer", "reasoning": "", "answer": "json"}'])
    agent = agent_for(llm)

    assert not agent._native_mode_active
    assert (await agent.run("q")).answer == "json"


async def test_empty_registry_sends_no_tools() -> None:
    llm = native_llm("plain")

    result = await ReActAgent(llm, ToolRegistry()).run("q")

    assert result.answer == "plain"
    assert llm.calls[0]["tools"] is None and llm.calls[0]["tool_choice"] is None
