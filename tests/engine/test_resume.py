"""Resuming a paused run: the loop goes on from the paused run's trace (its question,
tool calls and results, exactly as it sent them), then the user's note.

Real HTTP: the OpenAI-compatible client against the scripted server, whose recorded
requests are what the model received.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import ChatMessage, ContextGuard, OpenAICompatibleLLM, ReActAgent, ToolCall, prompts
from engine.context import estimate_messages_tokens
from engine.tools import Tool, ToolRegistry
from testing.scripted_server import ScriptedServer

OBJECT = {"type": "object"}
QUESTION = "Count the rows of the orders table."
NOTE = "I unlocked the database, try again."
HISTORY = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello! How can I help?")]


def tools() -> ToolRegistry:
    async def count_rows(**kwargs: Any) -> str:
        raise ValueError("database is locked")

    return ToolRegistry([Tool("count_rows", "Count a table's rows", OBJECT, count_rows)])


def native_call(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "count_rows", "arguments": arguments}]}


def json_call(**arguments: Any) -> str:
    action = {"type": "tool_call", "reasoning": "", "tool_name": "count_rows"}
    return json.dumps(action | {"tool_args": arguments})


def stored(trace: list[ChatMessage]) -> list[ChatMessage]:
    """The trace after a trip through a JSON column, as an application stores it."""
    return [ChatMessage.from_dict(d) for d in json.loads(json.dumps([m.to_dict() for m in trace]))]


def llm_for(server: ScriptedServer, *, native: bool) -> OpenAICompatibleLLM:
    abilities = {"tool_call": native, "streaming": True}
    return OpenAICompatibleLLM(server.base_url, None, "m", abilities, max_retries=0)


@pytest.mark.parametrize("native", [True, False], ids=["native", "json"])
async def test_the_resumed_loop_sees_the_trace_then_the_note(
    scripted_server: ScriptedServer, native: bool
) -> None:
    call = native_call if native else json_call
    scripted_server.push(call(table="orders"), call(table="orders", n=2), call(n=3))
    llm = llm_for(scripted_server, native=native)

    paused = await ReActAgent(llm, tools()).run(QUESTION, HISTORY)

    assert paused.status == "paused" and paused.stop_reason == "repeated_error"
    assert len(scripted_server.requests) == 3
    last_paused_request = scripted_server.requests[-1]["messages"]

    answer = "The orders table has 1,204 rows."
    final = {"type": "final_answer", "reasoning": "", "answer": answer}
    scripted_server.push(answer if native else json.dumps(final))
    resumed = await ReActAgent(llm, tools()).run(NOTE, HISTORY, resume=stored(paused.trace))

    assert resumed.status == "succeeded"
    assert resumed.answer == answer
    first = scripted_server.requests[3]["messages"]
    # Everything the paused run last sent, unchanged (the system prompt, the history, the
    # question, the first two calls and their results) ...
    assert first[: len(last_paused_request)] == last_paused_request
    # ... then its third call and that call's result, then the note.
    third_call, third_result, note = first[len(last_paused_request) :]
    assert third_call["role"] == "assistant"
    if native:
        assert [c["function"]["name"] for c in third_call["tool_calls"]] == ["count_rows"]
        assert third_result["role"] == "tool"
        assert third_result["tool_call_id"] == third_call["tool_calls"][0]["id"]
    else:
        assert json.loads(third_call["content"])["tool_args"] == {"n": 3}
        assert third_result["role"] == "user"
        assert third_result["content"].startswith("Observation: ")
    assert "database is locked" in third_result["content"]
    assert note == {"role": "user", "content": NOTE}
    await llm.aclose()


async def test_a_run_paused_for_no_progress_goes_on_after_its_reminders(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.push("", "", "")
    llm = llm_for(scripted_server, native=True)
    paused = await ReActAgent(llm, tools()).run(QUESTION)
    assert paused.status == "paused" and paused.stop_reason == "no_progress"

    scripted_server.push("Done.")
    resumed = await ReActAgent(llm, tools()).run(NOTE, resume=stored(paused.trace))

    assert resumed.answer == "Done."
    sent = scripted_server.requests[-1]["messages"]
    reminder = prompts.EMPTY_TURN_REMINDER
    assert [m["content"] for m in sent[1:]] == [QUESTION, reminder, reminder, NOTE]
    await llm.aclose()


async def test_a_resumed_run_that_pauses_again_can_be_resumed_again(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.push(native_call(a=1), native_call(a=2), native_call(a=3))
    llm = llm_for(scripted_server, native=True)
    first = await ReActAgent(llm, tools()).run(QUESTION)
    scripted_server.push(native_call(b=1), native_call(b=2), native_call(b=3))

    second = await ReActAgent(llm, tools()).run(NOTE, resume=stored(first.trace))

    assert second.status == "paused"
    # Its trace starts at the original question and holds the note and both runs' calls.
    assert second.trace[0].content == QUESTION
    assert [m.content for m in second.trace if m.role == "user"] == [QUESTION, NOTE]
    assert sum(len(m.tool_calls or ()) for m in second.trace) == 6

    scripted_server.push("Done.")
    third = await ReActAgent(llm, tools()).run("Go on.", resume=stored(second.trace))

    sent = scripted_server.requests[-1]["messages"]
    assert [m["content"] for m in sent if m["role"] == "user"] == [QUESTION, NOTE, "Go on."]
    assert third.answer == "Done."
    await llm.aclose()


async def test_a_long_trace_is_bounded_by_the_context_guard(
    scripted_server: ScriptedServer,
) -> None:
    """What the model gets of a resumed trace fits the budget like any history."""
    big = "x" * 12_000
    trace = [ChatMessage("user", QUESTION, pinned=True)]
    for k in range(6):
        call = ToolCall(f"call_{k}", "count_rows", {"k": k})
        trace += [
            ChatMessage("assistant", "", tool_calls=[call]),
            ChatMessage("tool", f"rows {k}: {big}", tool_call_id=call.id, name="count_rows"),
        ]
    guard = ContextGuard(budget_tokens=6_000)  # no summariser: it truncates
    scripted_server.push("Done.")
    llm = llm_for(scripted_server, native=True)

    result = await ReActAgent(llm, tools(), context_guard=guard).run(NOTE, resume=trace)

    assert result.status == "succeeded"
    sent = [
        ChatMessage(
            m["role"],
            m["content"],
            tool_calls=[
                ToolCall(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                for c in m.get("tool_calls", [])
            ]
            or None,
        )
        for m in scripted_server.requests[0]["messages"]
    ]
    assert estimate_messages_tokens(sent) <= 6_000
    assert sent[-1].content == NOTE
    assert any(m.content == QUESTION for m in sent)  # the pinned question stays
    await llm.aclose()


def test_messages_round_trip_through_json() -> None:
    messages = [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", [{"type": "text", "text": "Look"}], pinned=True),
        ChatMessage(
            "assistant",
            None,
            tool_calls=[ToolCall("c1", "count_rows", {"table": "orders"})],
            reasoning="Counting.",
        ),
        ChatMessage("tool", "Error: locked", tool_call_id="c1", name="count_rows"),
    ]

    assert stored(messages) == messages


@pytest.mark.parametrize(
    "data",
    [
        "text",
        {"content": "no role"},
        {"role": "robot", "content": "x"},
        {"role": "user", "content": 5},
        {"role": "user", "content": ["not a part"]},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "arguments": "{}"}]},
        {"role": "assistant", "content": "", "tool_calls": [{"arguments": {}}]},
        {"role": "assistant", "content": "", "tool_calls": {"name": "t"}},
        {"role": "tool", "content": "", "tool_call_id": 7},
    ],
)
def test_from_dict_refuses_what_is_not_a_message(data: Any) -> None:
    with pytest.raises(ValueError):
        ChatMessage.from_dict(data)
