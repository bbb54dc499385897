"""Loop guards: max iterations, repeated errors, empty turns, repeated calls, context."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from engine import prompts
from engine.agent import ReActAgent
from engine.errors import AgentPaused, EngineError, ErrorTracker
from engine.events import AgentEvent, AnswerDelta, AnswerSignal, ThinkingStart
from engine.llm.base import AuthenticationError, ContextOverflowError, UnavailableError
from engine.messages import ChatMessage
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object"}


def make_tools(calls: list[dict[str, Any]] | None = None) -> ToolRegistry:
    async def ping(**kwargs: Any) -> str:
        if calls is not None:
            calls.append(kwargs)
        return "pong"

    async def broken(**kwargs: Any) -> str:
        raise ValueError("database is locked")

    return ToolRegistry(
        [Tool("ping", "Ping", OBJECT, ping), Tool("broken", "Fails", OBJECT, broken)]
    )


def native(*items: Any) -> ScriptedLLM:
    return ScriptedLLM(items, abilities={"tool_call": True})


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# ---------------------------------------------------------------- ErrorTracker


def test_error_tracker_counts_signatures_and_stops_at_the_third() -> None:
    tracker = ErrorTracker()
    assert tracker.record("ValueError", "boom") == 1
    assert tracker.record("KeyError", "boom") == 1
    assert tracker.record("ValueError", "other") == 1
    assert tracker.record("ValueError", "boom") == 2
    assert not tracker.should_stop
    assert tracker.record("ValueError", "boom") == 3
    assert tracker.should_stop
    assert tracker.repeated == "ValueError:boom"
    tracker.reset()
    assert not tracker.should_stop and tracker.counts == {}


def test_engine_errors_share_a_base() -> None:
    paused = AgentPaused("stopped", reason="no_progress")
    assert isinstance(paused, EngineError) and paused.reason == "no_progress"


# ---------------------------------------------------------------- max iterations


async def test_max_iterations_fallback_lists_every_step() -> None:
    llm = native(call("ping", n=1), call("broken"), call("ping", n=2))

    result = await ReActAgent(llm, make_tools(), max_iterations=3).run("loop forever")

    assert result.status == "succeeded" and result.stop_reason == "max_iterations"
    assert result.iterations == 3
    assert result.answer == (
        "I could not complete the task within 3 iterations.\n"
        "Steps taken:\n"
        "- called ping -> OK\n"
        "- called broken -> ERROR: Tool 'broken' failed: ValueError: database is locked\n"
        "- called ping -> OK"
    )
    assert llm.remaining == 0


async def test_max_iterations_default_is_fifty() -> None:
    assert ReActAgent(native(), make_tools()).max_iterations == 50
    with pytest.raises(ValueError):
        ReActAgent(native(), make_tools(), max_iterations=0)


# ---------------------------------------------------------------- ErrorTracker in the loop


async def test_third_identical_error_pauses_the_run() -> None:
    llm = native(call("broken", a=1), call("ping", n=1), call("broken", a=2), call("broken", a=3))

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "paused" and result.stop_reason == "repeated_error"
    assert result.iterations == 4
    assert "3 times" in result.answer
    assert "ValueError:Tool 'broken' failed: ValueError: database is locked" in result.answer
    assert result.error == result.answer
    assert llm.remaining == 0  # no fifth LLM call


async def test_third_identical_unknown_tool_error_pauses_in_json_mode() -> None:
    reply = json.dumps(
        {"type": "tool_call", "reasoning": "", "tool_name": "ghost", "tool_args": {}}
    )
    reply2 = json.dumps(
        {"type": "tool_call", "reasoning": "", "tool_name": "ghost", "tool_args": {"x": 1}}
    )
    llm = ScriptedLLM([reply, reply2, reply])

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "paused"
    assert "UnknownToolError:Unknown tool 'ghost'" in result.answer


# ---------------------------------------------------------------- empty turns


async def test_empty_turn_gets_a_reminder() -> None:
    llm = native("", "answer after reminder")

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.answer == "answer after reminder"
    reminder = llm.calls[1]["messages"][-1]
    assert reminder.role == "user"
    assert reminder.content.startswith("You must call a tool or give the final answer")


async def test_three_empty_turns_in_a_row_pause_the_run() -> None:
    llm = ScriptedLLM(["", "   ", ""])

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "paused" and result.stop_reason == "no_progress"
    assert result.answer == prompts.no_progress_message(3)
    reminders = [m for m in result.messages if m.content == prompts.EMPTY_TURN_REMINDER]
    assert len(reminders) == 2


async def test_empty_turn_counter_resets_after_progress() -> None:
    llm = native("", "", call("ping"), "", "", "finally")

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "succeeded" and result.answer == "finally"


async def test_empty_json_answer_counts_as_an_empty_turn() -> None:
    empty = json.dumps({"type": "final_answer", "reasoning": "hmm", "answer": ""})
    llm = ScriptedLLM([empty, empty, empty])

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.stop_reason == "no_progress"


# ---------------------------------------------------------------- repeated calls


async def test_third_identical_call_in_a_row_is_not_run() -> None:
    calls: list[dict[str, Any]] = []
    llm = native(call("ping", x=1), call("ping", x=1), call("ping", x=1), "stopped repeating")

    result = await ReActAgent(llm, make_tools(calls)).run("q")

    assert calls == [{"x": 1}, {"x": 1}]
    third = result.steps[2]
    assert third.error is not None
    assert third.observation == prompts.repeated_call_warning("ping")
    assert "repeating yourself" in llm.calls[3]["messages"][-1].content
    assert result.answer == "stopped repeating"


async def test_different_arguments_reset_the_repeat_count() -> None:
    calls: list[dict[str, Any]] = []
    llm = native(call("ping", x=1), call("ping", x=1), call("ping", x=2), call("ping", x=2), "ok")

    await ReActAgent(llm, make_tools(calls)).run("q")

    assert calls == [{"x": 1}, {"x": 1}, {"x": 2}, {"x": 2}]


# ---------------------------------------------------------------- LLM failures


async def test_llm_error_fails_the_run_without_raising() -> None:
    llm = native(call("ping"), AuthenticationError("invalid API key", status_code=401))

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "failed" and result.stop_reason == "llm_error"
    assert result.error == "AuthenticationError: invalid API key"
    assert len(result.steps) == 1


class FakeGuard:
    """Records compaction requests; drops everything but system + last message."""

    def __init__(self, budget_tokens: int = 1000) -> None:
        self.budget_tokens = budget_tokens
        self.requests: list[tuple[int, str, int | None]] = []

    async def check_and_compact(
        self,
        messages: list[ChatMessage],
        *,
        hint: str = "react_iteration",
        budget_tokens: int | None = None,
    ) -> list[ChatMessage]:
        self.requests.append((len(messages), hint, budget_tokens))
        if budget_tokens is None:
            return list(messages)
        return [messages[0], ChatMessage("system", "[Conversation summary]: ..."), messages[-1]]


async def test_context_guard_runs_before_every_llm_call() -> None:
    guard = FakeGuard()
    llm = native(call("ping"), call("ping", n=2), "done")

    await ReActAgent(llm, make_tools(), context_guard=guard).run("q")

    assert [(hint, budget) for _, hint, budget in guard.requests] == [("react_iteration", None)] * 3


async def test_context_overflow_compacts_to_half_and_retries_once() -> None:
    guard = FakeGuard(budget_tokens=1000)
    llm = native(ContextOverflowError("too long"), "fits now")

    result = await ReActAgent(llm, make_tools(), context_guard=guard).run("q")

    assert result.answer == "fits now" and result.status == "succeeded"
    assert guard.requests[-1][1:] == ("react_iteration", 500)
    assert [m.content for m in llm.calls[1]["messages"]][1] == "[Conversation summary]: ..."
    assert result.iterations == 1


async def test_second_context_overflow_fails_the_run() -> None:
    guard = FakeGuard()
    llm = native(ContextOverflowError("too long"), ContextOverflowError("still too long"))

    result = await ReActAgent(llm, make_tools(), context_guard=guard).run("q")

    assert result.status == "failed" and "still too long" in (result.error or "")


async def test_context_overflow_without_guard_fails() -> None:
    llm = native(ContextOverflowError("too long"))

    result = await ReActAgent(llm, make_tools()).run("q")

    assert result.status == "failed" and result.error == "ContextOverflowError: too long"
    assert llm.remaining == 0


# ---------------------------------------------------------------- events


async def test_event_callback_failures_never_break_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(event: AgentEvent) -> None:
        raise RuntimeError("renderer bug")

    llm = native(call("ping"), "fine")
    with caplog.at_level(logging.ERROR, logger="engine.agent"):
        result = await ReActAgent(llm, make_tools(), on_event=explode).run("q")

    assert result.answer == "fine"
    assert "on_event callback failed" in caplog.text


async def test_async_event_callback_is_awaited() -> None:
    seen: list[AgentEvent] = []

    async def collect(event: AgentEvent) -> None:
        seen.append(event)

    await ReActAgent(native("hi"), make_tools(), on_event=collect).run("q")

    assert isinstance(seen[0], ThinkingStart)
    assert [e.content for e in seen if isinstance(e, AnswerDelta)] == ["hi"]


async def test_failed_runs_emit_no_answer_signal() -> None:
    seen: list[AgentEvent] = []
    llm = native(UnavailableError("down"))

    await ReActAgent(llm, make_tools(), on_event=seen.append).run("q")

    assert not any(isinstance(e, AnswerSignal) for e in seen)


async def test_tool_args_are_not_logged_at_info(caplog: pytest.LogCaptureFixture) -> None:
    llm = native(call("ping", api_key="sk-secret-123"), "ok")
    with caplog.at_level(logging.INFO, logger="engine"):
        await ReActAgent(llm, make_tools()).run("q")

    assert "tool ping succeeded" in caplog.text
    assert "sk-secret-123" not in caplog.text
