"""A reply is whole only when its stream says so: a ``finish_reason`` or ``[DONE]``.

A body that ends cleanly with neither (a server or proxy that gave up without saying so)
is a cut stream: the text that arrived is kept as an incomplete answer, never saved as
a complete one, and a half-streamed tool call never runs.
"""

from __future__ import annotations

import pytest

from engine.agent import ReActAgent
from engine.events import Done
from engine.llm.base import StreamEndedEarly
from engine.llm.openai import OpenAICompatibleLLM
from engine.messages import ChatMessage
from engine.tools import Tool, ToolRegistry

ABILITIES = {"tool_call": True, "streaming": True}
WORDS = [f"w{i} " for i in range(50)]


def llm(server) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(server.base_url, None, "m", ABILITIES, max_retries=0)


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

    async def delete(path: str = "") -> str:
        ran.append(path)
        return "deleted"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    tools = ToolRegistry([Tool("delete", "Delete a file", schema, delete)])
    call = {"name": "delete", "arguments": {"path": "/important"}}
    scripted_server.push({"tool_calls": [call], "finish_reason": None, "done": False})

    result = await ReActAgent(llm(scripted_server), tools).run("Clean up")

    assert ran == [] and result.status == "failed"
    assert "before the reply was complete" in result.answer
