"""A reply is whole only when its stream says so: a ``finish_reason`` or ``[DONE]``.

A body that ends cleanly with neither (a server or proxy that gave up without saying so)
is a cut stream: the text that arrived is kept as an incomplete answer, never saved as
a complete one, and a half-streamed tool call never runs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.agent import BROKEN_ANSWER, ReActAgent
from engine.events import AgentEvent, Done
from engine.llm.base import StreamEndedEarly, plain_message
from engine.llm.openai import OpenAICompatibleLLM
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage
from engine.plan import PlanAgent, PlanConfig
from engine.plan import prompts as plan_prompts
from engine.tools import Tool, ToolRegistry

ABILITIES = {"tool_call": True, "streaming": True}
JSON_ABILITIES = {"tool_call": False, "streaming": True}
WORDS = [f"w{i} " for i in range(50)]
EARLY = {"finish_reason": None, "done": False}  # the body ends cleanly, nothing says done
SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}


def llm(server, abilities: dict[str, Any] = ABILITIES, retries: int = 0) -> OpenAICompatibleLLM:
    client = OpenAICompatibleLLM(server.base_url, None, "m", abilities, max_retries=retries)
    client.backoff_base = 0.0  # a retry at once: the test waits on no backoff
    return client


def deleting(ran: list[str]) -> ToolRegistry:
    """A tool whose every run is recorded: a half call must never reach it."""

    async def delete(path: str = "") -> str:
        ran.append(path)
        return "deleted"

    return ToolRegistry([Tool("delete", "Delete a file", SCHEMA, delete)])


async def ended(agent: ReActAgent | PlanAgent, events: list[AgentEvent], query: str) -> Done:
    """Run ``agent`` to its end (the loop, then the answer phase); its ``Done`` event."""
    result = await agent.run(query)
    async for _chunk in agent.stream_answer(result, query):
        pass
    return next(e for e in events if isinstance(e, Done))


async def streamed(server) -> tuple[str, str | None]:
    client = llm(server)
    text, finish = "", None
    async with client:
        async for delta in client.stream_chat([ChatMessage("user", "hi")]):
            text += delta.content or ""
            finish = delta.finish_reason or finish
    return text, finish


@pytest.mark.parametrize(
    "ending",
    [{"finish_reason": None}, {"done": False}],
    ids=["done-without-finish-reason", "finish-reason-without-done"],
)
async def test_either_marker_ends_a_reply(scripted_server, ending):
    scripted_server.push({"chunks": WORDS, **ending})

    text, _finish = await streamed(scripted_server)

    assert text == "".join(WORDS)


async def test_a_body_ending_with_neither_marker_is_a_cut_stream(scripted_server):
    scripted_server.push({"chunks": WORDS[:5], "finish_reason": None, "done": False})

    with pytest.raises(StreamEndedEarly, match="finish_reason"):
        await streamed(scripted_server)


async def test_the_answer_it_cut_is_kept_as_incomplete(scripted_server):
    scripted_server.push({"chunks": WORDS, "finish_reason": None, "done": False})
    events: list = []

    agent = ReActAgent(llm(scripted_server), on_event=events.append)
    result = await agent.run("Tell me")
    async for _chunk in agent.stream_answer(result, "Tell me"):
        pass

    assert result.status == "incomplete" and result.stop_reason == "stream_broken"
    assert result.answer == "".join(WORDS)
    done = next(e for e in events if isinstance(e, Done))
    assert done.status == "incomplete" and done.reason


async def test_a_tool_call_cut_this_way_never_runs(scripted_server):
    ran: list[str] = []
    call = {"name": "delete", "arguments": {"path": "/important"}}
    scripted_server.push({"tool_calls": [call], **EARLY})

    result = await ReActAgent(llm(scripted_server), deleting(ran)).run("Clean up")

    assert ran == [] and result.status == "failed"
    assert "before the reply was complete" in result.answer
    assert result.answer == plain_message(StreamEndedEarly("x"))


async def test_a_half_tool_call_nothing_showed_of_is_asked_again_and_runs_once_whole(
    scripted_server,
):
    """Nothing reached the user, so the call is retried like any failed request: only the
    retry's whole call runs."""
    ran: list[str] = []
    half = {"tool_calls": [{"name": "delete", "arguments": '{"path": "/tmp/ol'}], **EARLY}
    whole = {"tool_calls": [{"name": "delete", "arguments": {"path": "/tmp/old"}}]}
    scripted_server.push(half, whole, "Cleaned up.")

    result = await ReActAgent(llm(scripted_server, retries=1), deleting(ran)).run("Clean up")

    assert ran == ["/tmp/old"]
    assert result.status == "succeeded" and result.answer == "Cleaned up."


async def test_a_json_mode_answer_cut_this_way_is_kept_incomplete(scripted_server):
    head = '{"type": "final_answer", "reasoning": "easy", "answer": "'
    scripted_server.push({"chunks": [head, *WORDS[:10]], **EARLY})
    events: list[AgentEvent] = []
    agent = ReActAgent(llm(scripted_server, JSON_ABILITIES), on_event=events.append)

    done = await ended(agent, events, "Tell me")

    assert (done.status, done.reason) == ("incomplete", BROKEN_ANSWER)
    assert done.answer == "".join(WORDS[:10])


async def test_a_json_mode_tool_call_cut_this_way_never_runs(scripted_server):
    ran: list[str] = []
    action = {"type": "tool_call", "reasoning": "r", "tool_name": "delete", "tool_args": {}}
    half = json.dumps(action)[:-3] + '{"path": "/impor'
    scripted_server.push({"chunks": [half[:30], half[30:]], **EARLY})
    agent = ReActAgent(llm(scripted_server, JSON_ABILITIES), deleting(ran))

    result = await agent.run("Clean up")

    assert ran == [] and result.status == "failed"
    assert result.answer == plain_message(StreamEndedEarly("x"))


async def test_a_rewrite_cut_this_way_is_kept_incomplete(scripted_server):
    """The loop's answer is rewritten after a tool: the rewrite's stream ends early, so the
    answer is what it showed, marked incomplete (not the draft, not a complete answer)."""
    ran: list[str] = []
    call = {"tool_calls": [{"name": "delete", "arguments": {"path": "/tmp/old"}}]}
    scripted_server.push(call, "draft answer", {"chunks": WORDS[:8], **EARLY})
    events: list[AgentEvent] = []
    agent = ReActAgent(
        llm(scripted_server), deleting(ran), on_event=events.append, rewrite_answer=True
    )

    done = await ended(agent, events, "Clean up")

    assert ran == ["/tmp/old"] and len(scripted_server.requests) == 3
    assert (done.status, done.reason) == ("incomplete", BROKEN_ANSWER)
    assert done.answer == "".join(WORDS[:8])


async def test_a_plan_answer_cut_this_way_is_kept_incomplete(scripted_server):
    plan = {"steps": [{"id": "s1", "task": "Find the weather in Oslo", "dependencies": []}]}
    verdict = {"achieved": True, "confidence": 0.9, "final_answer": "12 C", "reasoning": "ok"}
    scripted_server.set_rules(
        [
            {
                "contains": plan_prompts.planner_system_prompt(10)[:60],
                "in": "any",
                "response": json.dumps(plan),
            },
            {
                "contains": plan_prompts.ANALYZER_SYSTEM_PROMPT[:60],
                "in": "any",
                "response": json.dumps(verdict),
            },
            {
                "contains": plan_prompts.ANSWER_SYSTEM_PROMPT[:60],
                "in": "any",
                "response": {"chunks": WORDS[:6], **EARLY},
            },
            {"contains": "Find the weather in Oslo", "in": "any", "response": "Oslo: 12 C"},
        ]
    )
    client = llm(scripted_server)
    registry = ModelRegistry()
    registry.register("m", client, default=True)
    events: list[AgentEvent] = []
    agent = PlanAgent(registry, on_event=events.append, config=PlanConfig(poll_interval=0.01))

    done = await ended(agent, events, "Weather in Oslo?")

    assert (done.status, done.reason) == ("incomplete", BROKEN_ANSWER)
    assert done.answer == "".join(WORDS[:6])


@pytest.mark.parametrize("mode", ["native", "json"])
async def test_a_tool_call_cut_at_the_output_limit_never_runs(scripted_server, mode):
    """The reply hit the model's output limit inside its tool call: the arguments are cut
    (a repaired half path is still a path), so the call is refused, never run, and the
    model is told; it makes the call again, whole."""
    ran: list[str] = []
    if mode == "native":
        cut = {"tool_calls": [{"name": "delete", "arguments": '{"path": "/important/sub'}]}
        whole = {"tool_calls": [{"name": "delete", "arguments": {"path": "/tmp/old"}}]}
        abilities = ABILITIES
    else:
        action = {"type": "tool_call", "reasoning": "r", "tool_name": "delete"}
        cut = {"content": json.dumps(action)[:-1] + ', "tool_args": {"path": "/important/sub'}
        whole = {"content": json.dumps({**action, "tool_args": {"path": "/tmp/old"}})}
        abilities = JSON_ABILITIES
    final = (
        "Cleaned up."
        if mode == "native"
        else json.dumps({"type": "final_answer", "reasoning": "done", "answer": "Cleaned up."})
    )
    scripted_server.push({**cut, "finish_reason": "length"}, whole, final)

    result = await ReActAgent(llm(scripted_server, abilities), deleting(ran)).run("Clean up")

    assert ran == ["/tmp/old"]  # only the whole call
    assert result.steps[0].error and "output limit" in result.steps[0].error
    told = json.dumps(scripted_server.requests[1]["messages"])
    assert "cut off" in told and result.answer == "Cleaned up."


def test_a_server_error_and_no_connection_are_told_apart() -> None:
    """Issue 47: an HTTP 500 and a refused connection said the same vague thing."""
    from engine.llm.base import UnavailableError

    assert plain_message(UnavailableError("HTTP 500: boom", status_code=500)) == (
        "The model's server answered with an error of its own (it failed or is overloaded). "
        "Retry, or an administrator can see why in the run's details."
    )
    assert plain_message(UnavailableError("cannot reach http://x: ConnectError")) == (
        "The model's server could not be reached (no connection). Retry, or an administrator "
        "can check that it is running at the provider's address."
    )
