"""Cancellation: mid-tool, mid-LLM-call, between steps and mid-stream."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from engine.agent import AgentResult, ReActAgent
from engine.cancel import CancelToken
from engine.events import AgentEvent, AnswerDelta, AnswerDone, Done, IterationDone
from engine.messages import ChatMessage, Usage
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object"}


def native(*items: Any) -> ScriptedLLM:
    return ScriptedLLM(items, abilities={"tool_call": True})


def calls(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": {}} for n in names]}


async def test_cancel_mid_tool_stops_the_run_with_the_steps_so_far() -> None:
    token = CancelToken()
    tool_was_cancelled = asyncio.Event()
    never = asyncio.Event()

    async def fast() -> str:
        return "fast done"

    async def stuck() -> str:
        token.cancel()  # the user presses Stop while this tool runs
        try:
            await never.wait()
        except asyncio.CancelledError:
            tool_was_cancelled.set()
            raise
        return "never"

    tools = ToolRegistry([Tool("fast", "f", OBJECT, fast), Tool("stuck", "s", OBJECT, stuck)])
    llm = native(calls("fast"), calls("stuck"), "unreachable")
    events: list[AgentEvent] = []

    result = await ReActAgent(llm, tools, cancel=token, on_event=events.append).run("q")

    assert result.status == "cancelled" and result.stop_reason == "cancelled"
    assert tool_was_cancelled.is_set()
    assert [(s.tool_name, s.error) for s in result.steps] == [
        ("fast", None),
        ("stuck", "Cancelled by the user"),
    ]
    assert llm.remaining == 1  # no LLM call after the cancel
    assert result.messages[-1].role == "tool"  # history stays valid: every call has a result
    assert [e.tool_name for e in events if isinstance(e, IterationDone)] == ["fast", "stuck"]


async def test_cancel_from_another_thread_cancels_parallel_tools() -> None:
    token = CancelToken()
    started = 0
    cancelled: list[str] = []
    never = asyncio.Event()

    async def waiter(name: str) -> str:
        nonlocal started
        started += 1
        try:
            if started == 2:  # the cancel may land while this call is still joining
                stopper = threading.Thread(target=token.cancel)
                stopper.start()
                await asyncio.to_thread(stopper.join)
            await never.wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return "never"

    tools = ToolRegistry([Tool("wait", "w", OBJECT, waiter)])
    llm = native(
        {
            "tool_calls": [
                {"name": "wait", "arguments": {"name": "a"}},
                {"name": "wait", "arguments": {"name": "b"}},
            ]
        }
    )

    result = await asyncio.wait_for(ReActAgent(llm, tools, cancel=token).run("q"), timeout=5)

    assert result.status == "cancelled"
    assert sorted(cancelled) == ["a", "b"]
    assert [m.role for m in result.messages[-3:]] == ["assistant", "tool", "tool"]


async def test_cancel_mid_llm_call_closes_the_request() -> None:
    token = CancelToken()
    request_closed = asyncio.Event()

    async def slow_http_call(messages: list[ChatMessage], kwargs: dict[str, Any]) -> str:
        token.cancel()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            request_closed.set()
            raise
        return "never"

    result = await ReActAgent(native(slow_http_call), ToolRegistry(), cancel=token).run("q")

    assert result.status == "cancelled"
    assert request_closed.is_set()
    assert result.iterations == 1 and result.steps == []


async def test_cancelled_before_start_makes_no_llm_call() -> None:
    token = CancelToken()
    token.cancel()
    llm = native("never")

    result = await ReActAgent(llm, ToolRegistry(), cancel=token).run("q")

    assert result.status == "cancelled" and result.iterations == 0
    assert llm.calls == []


async def test_cancel_between_steps_is_checked() -> None:
    token = CancelToken()

    def stop_after_first_tool(event: AgentEvent) -> None:
        if isinstance(event, IterationDone):
            token.cancel()

    async def ping() -> str:
        return "pong"

    llm = native(calls("ping"), "unreachable")
    agent = ReActAgent(
        llm,
        ToolRegistry([Tool("ping", "p", OBJECT, ping)]),
        cancel=token,
        on_event=stop_after_first_tool,
    )

    result = await agent.run("q")

    assert result.status == "cancelled"
    assert [s.error for s in result.steps] == [None]
    assert len(llm.calls) == 1


async def test_cancel_while_the_answer_streams_stops_and_closes_the_stream() -> None:
    token = CancelToken()
    events: list[AgentEvent] = []
    words = " ".join(f"word{n}" for n in range(50))
    llm = ScriptedLLM([words], abilities={"tool_call": True}, stream_chunk_delay=0.001)

    def stop_after_two_deltas(event: AgentEvent) -> None:
        events.append(event)
        if sum(isinstance(e, AnswerDelta) for e in events) == 2:
            token.cancel()

    agent = ReActAgent(llm, ToolRegistry(), cancel=token, on_event=stop_after_two_deltas)
    result = await agent.run("q")
    chunks = [c async for c in agent.stream_answer(result, "q")]

    assert result.status == "cancelled" and chunks == []
    assert llm.calls[0]["closed"] is True
    assert sum(isinstance(e, AnswerDelta) for e in events) == 2
    assert not any(isinstance(e, AnswerDone | Done) for e in events)


def _succeeded_result() -> AgentResult:
    return AgentResult(
        answer="loop answer", messages=[], steps=[], iterations=1, usage=Usage(), elapsed=0.0
    )


async def test_stream_answer_of_a_cancelled_run_yields_nothing() -> None:
    token = CancelToken()
    token.cancel()
    llm = ScriptedLLM(["never"])
    agent = ReActAgent(llm, ToolRegistry(), cancel=token)

    chunks = [c async for c in agent.stream_answer(_succeeded_result(), "q")]

    assert chunks == [] and llm.calls == []
