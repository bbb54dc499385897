"""Interrupts: drained at the mode's point, one pinned message per drain, answer deferred."""

from __future__ import annotations

import json
import threading
from typing import Any

from engine import prompts
from engine.agent import ReActAgent
from engine.events import AgentEvent, AnswerDelta, AnswerReset, Inject
from engine.interrupts import InterruptQueue
from engine.messages import ChatMessage
from engine.tools import Tool, ToolRegistry
from testing.scripted_llm import ScriptedLLM

OBJECT = {"type": "object"}


def tool_call(name: str, **args: Any) -> str:
    return json.dumps({"type": "tool_call", "reasoning": "", "tool_name": name, "tool_args": args})


def final(answer: str) -> str:
    return json.dumps({"type": "final_answer", "reasoning": "", "answer": answer})


def native_call(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": n, "arguments": {}} for n in names]}


def interrupt_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if m.content.startswith("[USER INTERRUPT]")]


def registry_with(queue: InterruptQueue, *texts: str) -> ToolRegistry:
    """``talk`` puts follow-ups while it runs (as a user typing mid-run would)."""

    async def talk() -> str:
        for text in texts:
            queue.put(text)
        return "talked"

    async def quiet() -> str:
        return "quiet"

    return ToolRegistry([Tool("talk", "t", OBJECT, talk), Tool("quiet", "q", OBJECT, quiet)])


def test_interrupt_texts() -> None:
    assert prompts.format_interrupt(["also in French"]).startswith(
        "[USER INTERRUPT]: also in French\n\n"
    )
    several = prompts.format_interrupt(["first", "second"])
    assert several.startswith(
        "[USER INTERRUPT]: The user sent 2 messages while you were working:\n1. first\n2. second"
    )
    assert "all of them" in several


async def test_json_mode_defers_the_final_answer_for_an_interrupt() -> None:
    queue = InterruptQueue()
    events: list[AgentEvent] = []
    llm = ScriptedLLM([tool_call("talk"), final("premature"), final("answer incl. French")])
    agent = ReActAgent(
        llm, registry_with(queue, "also in French"), interrupt_queue=queue, on_event=events.append
    )

    result = await agent.run("q")

    assert result.answer == "answer incl. French"
    assert result.iterations == 3
    # put during the tool, drained right after the NEXT assistant message (the premature answer)
    third = llm.calls[2]["messages"]
    assert [m.role for m in third[-4:]] == ["assistant", "user", "assistant", "user"]
    assert third[-2].content == final("premature")
    pinned = third[-1]
    assert pinned.pinned and pinned.content == prompts.format_interrupt(["also in French"])
    assert interrupt_messages(llm.calls[1]["messages"]) == []
    injects = [e for e in events if isinstance(e, Inject)]
    assert [e.to_dict() for e in injects] == [{"type": "inject", "content": "also in French"}]
    # The premature answer streamed, then was taken back; the final one streamed whole.
    assert sum(isinstance(e, AnswerReset) for e in events) == 1
    after_reset = events[[type(e) for e in events].index(AnswerReset) :]
    streamed = "".join(e.content for e in after_reset if isinstance(e, AnswerDelta))
    assert streamed == "answer incl. French"
    assert result.answer_streamed and result.pending_injections == []


async def test_json_mode_drains_right_after_the_assistant_message() -> None:
    queue = InterruptQueue()

    def reply_while_user_types(messages: list[ChatMessage], kwargs: dict[str, Any]) -> str:
        queue.put("use metric units")
        return tool_call("quiet")

    llm = ScriptedLLM([reply_while_user_types, final("done")])

    await ReActAgent(llm, registry_with(queue), interrupt_queue=queue).run("q")

    tail = llm.calls[1]["messages"][-3:]
    assert [m.role for m in tail] == ["assistant", "user", "user"]
    assert tail[1].content.startswith("[USER INTERRUPT]: use metric units") and tail[1].pinned
    assert tail[2].content == "Observation: quiet"


async def test_native_mode_drains_only_after_all_tool_results() -> None:
    queue = InterruptQueue()
    llm = ScriptedLLM([native_call("talk", "quiet"), "done"], abilities={"tool_call": True})

    result = await ReActAgent(llm, registry_with(queue, "stop at 3"), interrupt_queue=queue).run(
        "q"
    )

    tail = llm.calls[1]["messages"][-4:]
    assert [m.role for m in tail] == ["assistant", "tool", "tool", "user"]
    assert tail[-1].pinned and tail[-1].content.startswith("[USER INTERRUPT]: stop at 3")
    assert result.answer == "done"


async def test_native_mode_defers_the_final_answer() -> None:
    queue = InterruptQueue()

    def answer_while_user_types(messages: list[ChatMessage], kwargs: dict[str, Any]) -> str:
        queue.put("and the weather?")
        return "premature"

    llm = ScriptedLLM([answer_while_user_types, "both answered"], abilities={"tool_call": True})

    result = await ReActAgent(llm, registry_with(queue), interrupt_queue=queue).run("q")

    assert result.answer == "both answered"
    sent = llm.calls[1]["messages"]
    assert [m.role for m in sent[-2:]] == ["assistant", "user"]
    assert sent[-2].content == "premature" and sent[-1].pinned


async def test_several_follow_ups_become_one_numbered_message() -> None:
    queue = InterruptQueue()
    llm = ScriptedLLM([native_call("talk"), "done"], abilities={"tool_call": True})
    tools = registry_with(queue, "first", "second", "third")

    result = await ReActAgent(llm, tools, interrupt_queue=queue).run("q")

    [message] = interrupt_messages(result.messages)
    assert message.content == prompts.format_interrupt(["first", "second", "third"])
    assert "The user sent 3 messages" in message.content


async def test_follow_up_from_another_thread() -> None:
    queue = InterruptQueue()

    def sync_tool() -> str:  # runs in a worker thread; the web request is yet another one
        sender = threading.Thread(target=queue.put, args=("sent from a web request",))
        sender.start()
        sender.join()
        return "ok"

    tools = ToolRegistry([Tool("work", "w", OBJECT, sync_tool)])
    llm = ScriptedLLM([native_call("work"), "done"], abilities={"tool_call": True})

    result = await ReActAgent(llm, tools, interrupt_queue=queue).run("q")

    [message] = interrupt_messages(result.messages)
    assert message.content.startswith("[USER INTERRUPT]: sent from a web request")


async def test_unseen_and_queued_follow_ups_are_reported_as_pending() -> None:
    queue = InterruptQueue()
    llm = ScriptedLLM([native_call("talk")], abilities={"tool_call": True})
    agent = ReActAgent(
        llm, registry_with(queue, "drained but unseen"), interrupt_queue=queue, max_iterations=1
    )

    result = await agent.run("q")

    assert result.stop_reason == "max_iterations"
    assert result.pending_injections == ["drained but unseen"]


async def test_follow_ups_still_queued_when_paused_are_pending() -> None:
    queue = InterruptQueue()
    sent = 0

    async def talk_and_fail(attempt: int) -> str:
        nonlocal sent
        sent += 1
        queue.put(f"follow-up {sent}")
        raise ValueError("disk full")

    tools = ToolRegistry([Tool("flaky", "f", OBJECT, talk_and_fail)])
    replies = [{"tool_calls": [{"name": "flaky", "arguments": {"attempt": n}}]} for n in (1, 2, 3)]
    llm = ScriptedLLM(replies, abilities={"tool_call": True})

    result = await ReActAgent(llm, tools, interrupt_queue=queue).run("q")

    assert result.status == "paused"
    # follow-ups 1 and 2 reached the model; the third arrived as the guard stopped the run
    assert [len(interrupt_messages(c["messages"])) for c in llm.calls] == [0, 1, 2]
    assert result.pending_injections == ["follow-up 3"]
    assert len(queue) == 0


async def test_no_queue_means_no_interrupt_handling() -> None:
    llm = ScriptedLLM(["plain answer"], abilities={"tool_call": True})
    result = await ReActAgent(llm, ToolRegistry()).run("q")
    assert result.pending_injections == []
