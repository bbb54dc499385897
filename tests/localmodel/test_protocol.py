"""The OpenAI-compatible protocol as the real llama.cpp server speaks it (shape, not quality).

Each interop fact the engine relies on is pinned down here against the real server, so a
new llama-cpp-python release that changes one fails loudly.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from typing import Any

import httpx
import jsonschema
import pytest

from engine import (
    AuthenticationError,
    ChatMessage,
    ContextOverflowError,
    OpenAICompatibleLLM,
    ToolCall,
)
from engine.actions import ACTION_FORMAT_NAME, action_schema
from engine.prompts import json_system_prompt
from engine.structured import json_response_format
from llms.local_server import ServerInfo
from tests.localmodel.conftest import API_KEY, LOCAL_MODEL_ID, N_CTX, SAMPLING, make_llm

WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


async def raw_post(info: ServerInfo, body: dict[str, Any], *, key: str | None = API_KEY):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    payload = {"model": LOCAL_MODEL_ID, "max_tokens": 16, **SAMPLING, **body}
    async with httpx.AsyncClient(timeout=120) as client:
        return await client.post(f"{info.base_url}/chat/completions", json=payload, headers=headers)


async def raw_stream_chunks(info: ServerInfo, body: dict[str, Any]) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {API_KEY}"}
    payload = {"model": LOCAL_MODEL_ID, "max_tokens": 24, **SAMPLING, **body, "stream": True}
    chunks = []
    async with (
        httpx.AsyncClient(timeout=120) as client,
        client.stream(
            "POST", f"{info.base_url}/chat/completions", json=payload, headers=headers
        ) as response,
    ):
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    return chunks


# ------------------------------------------------------------------------------ chat


async def test_plain_chat(llm: OpenAICompatibleLLM):
    reply = await llm.chat(user("Say hello in one short sentence."))
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.tool_calls == []
    assert reply.finish_reason in {"stop", "length"}
    # Non-streamed replies report real usage.
    assert not reply.usage.estimated
    assert reply.usage.prompt_tokens > 0 and reply.usage.completion_tokens > 0


async def test_streamed_chat_usage_is_estimated(llm: OpenAICompatibleLLM, local_server):
    # The server ignores stream_options.include_usage: no chunk carries usage ...
    chunks = await raw_stream_chunks(
        local_server,
        {
            "messages": [{"role": "user", "content": "Count to five."}],
            "stream_options": {"include_usage": True},
        },
    )
    assert len(chunks) > 2
    assert not any(chunk.get("usage") for chunk in chunks)
    # ... so the engine estimates it and says so.
    deltas = [d async for d in llm.stream_chat(user("Count to five."))]
    text = "".join(d.content for d in deltas)
    assert text.strip() and sum(1 for d in deltas if d.content) > 2
    final = deltas[-1]
    assert final.finish_reason in {"stop", "length"}
    assert final.usage is not None and final.usage.estimated
    assert final.usage.completion_tokens > 0


# ------------------------------------------------------------------------------ JSON


async def test_json_mode_returns_valid_json(llm: OpenAICompatibleLLM):
    reply = await llm.chat(
        user('Reply with a JSON object like {"city": "Paris", "country": "France"}.'),
        response_format={"type": "json_object"},
    )
    assert isinstance(json.loads(reply.content), dict)


@pytest.mark.parametrize(
    "question",
    ["What is the weather in Paris?", "What is 17 * 23?", "Hello! Who are you?"],
)
async def test_schema_constrained_actions(llm: OpenAICompatibleLLM, question: str):
    """JSON mode with the action schema: every reply is a schema-valid action."""
    tools = ["get_weather", "calculator"]
    schema = action_schema(tools)
    response_format = json_response_format(llm.abilities, ACTION_FORMAT_NAME, schema)
    assert response_format == {"type": "json_object", "schema": schema}
    assert schema["properties"]["tool_name"]["enum"] == tools
    catalog = "- get_weather: Get the weather for a city.\n- calculator: Evaluate arithmetic."
    reply = await llm.chat(
        [ChatMessage("system", json_system_prompt(catalog)), *user(question)],
        response_format=response_format,
        max_tokens=120,
    )
    action = json.loads(reply.content)
    jsonschema.validate(action, schema)
    if action["type"] == "tool_call":
        assert action["tool_name"] in tools


# ------------------------------------------------------------------------------ tools


async def test_forced_tool_choice(llm: OpenAICompatibleLLM):
    reply = await llm.chat(
        user("What is the weather in Paris?"), tools=[WEATHER_TOOL], tool_choice=FORCE_WEATHER
    )
    assert len(reply.tool_calls) == 1
    call = reply.tool_calls[0]
    assert call.name == "get_weather" and call.id
    jsonschema.validate(call.arguments, WEATHER_TOOL["function"]["parameters"])
    assert reply.finish_reason == "tool_calls"


async def test_native_tool_call_structure_single_tool(local_server):
    """The raw wire form of a tool call: OpenAI's shape, arguments as a JSON string."""
    response = await raw_post(
        local_server,
        {
            "messages": [{"role": "user", "content": "What is the weather in Rome?"}],
            "tools": [WEATHER_TOOL],
            "tool_choice": FORCE_WEATHER,
            "max_tokens": 48,
        },
    )
    assert response.status_code == 200
    message = response.json()["choices"][0]["message"]
    assert message["role"] == "assistant"
    (call,) = message["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "get_weather"
    assert isinstance(call["function"]["arguments"], str)
    assert "city" in json.loads(call["function"]["arguments"])


async def test_streamed_tool_call_repeats_id_and_name(llm: OpenAICompatibleLLM, local_server):
    body = {
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [WEATHER_TOOL],
        "tool_choice": FORCE_WEATHER,
    }
    chunks = await raw_stream_chunks(local_server, body)
    fragments = [
        call
        for chunk in chunks
        for choice in chunk["choices"]
        for call in (choice.get("delta") or {}).get("tool_calls") or []
    ]
    assert len(fragments) > 1
    # Every fragment repeats the id and the name: a client must set them, not append.
    assert {f["id"] for f in fragments} == {fragments[0]["id"]}
    assert {f["function"]["name"] for f in fragments} == {"get_weather"}
    deltas = [
        d
        async for d in llm.stream_chat(
            user("What is the weather in Paris?"), tools=[WEATHER_TOOL], tool_choice=FORCE_WEATHER
        )
    ]
    (call,) = deltas[-1].tool_calls
    assert call.name == "get_weather" and call.id == call.id.strip()
    assert "__raw__" not in call.arguments and "city" in call.arguments


async def test_assistant_tool_call_message_sends_empty_content(
    llm: OpenAICompatibleLLM, local_server
):
    call = ToolCall("call_1", "get_weather", {"city": "Paris"})
    history = [
        *user("What is the weather in Paris?"),
        ChatMessage("assistant", None, tool_calls=[call]),
        ChatMessage("tool", "Sunny, 21 C", tool_call_id="call_1", name="get_weather"),
    ]
    wire = [m.to_openai() for m in history]
    assert wire[1]["content"] == "" and wire[1]["tool_calls"][0]["id"] == "call_1"
    # The server rejects null content on such a message ...
    rejected = await raw_post(
        local_server, {"messages": [*wire[:1], {**wire[1], "content": None}, wire[2]]}
    )
    assert rejected.status_code >= 400
    # ... and accepts the engine's "" form.
    reply = await llm.chat(history, tools=[WEATHER_TOOL])
    assert isinstance(reply.content, str)


# ------------------------------------------------------------------------------ errors


async def test_wrong_api_key(local_server):
    response = await raw_post(
        local_server, {"messages": [{"role": "user", "content": "hi"}]}, key="wrong-key"
    )
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid API key"}
    client = make_llm(local_server, api_key="wrong-key")
    try:
        with pytest.raises(AuthenticationError) as caught:
            await client.chat(user("hi"))
    finally:
        await client.aclose()
    assert caught.value.status_code == 401 and "Invalid API key" in caught.value.message
    assert "wrong-key" not in caught.value.message


async def test_context_overflow(llm: OpenAICompatibleLLM, local_server):
    long_text = "lorem ipsum dolor sit amet " * (N_CTX // 2)
    response = await raw_post(local_server, {"messages": [{"role": "user", "content": long_text}]})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "context_length_exceeded"
    with pytest.raises(ContextOverflowError) as caught:
        await llm.chat(user(long_text))
    assert caught.value.status_code == 400 and not caught.value.retryable


async def test_requests_are_served_one_at_a_time(local_server):
    """Two concurrent streams both complete; the second starts after the first ends."""

    async def timed_stream(prompt: str) -> tuple[float, float, str]:
        client = make_llm(local_server, max_tokens=24)
        try:
            first = last = None
            text = ""
            async for delta in client.stream_chat(user(prompt)):
                now = time.perf_counter()
                if delta.content:
                    first = first or now
                    last = now
                    text += delta.content
            return first or 0.0, last or 0.0, text
        finally:
            await client.aclose()

    (first_a, last_a, text_a), (first_b, last_b, text_b) = await asyncio.gather(
        timed_stream("Name three colours."), timed_stream("Name three animals.")
    )
    assert text_a.strip() and text_b.strip()  # neither was cut off by the other
    # No interleaving: one stream's tokens all arrive before the other's first token.
    assert last_a <= first_b or last_b <= first_a


async def test_the_prompt_reaches_the_model_unescaped(llm: OpenAICompatibleLLM):
    """The site's chat format (``chatml``) does not HTML-escape messages, as
    chatml-function-calling's Jinja template did (``&#34;`` for each ``"``): that cost
    tokens, leaked entities into answers and confused the model fed JSON (schema-constrained
    actions: 6/7 correct with ``chatml`` against 2/7; benchmarks/local_model_json.py)."""
    quotes = await llm.chat(user('"' * 30), max_tokens=1)
    letters = await llm.chat(user("a" * 30), max_tokens=1)
    assert quotes.usage.prompt_tokens < 2 * letters.usage.prompt_tokens


@pytest.mark.parametrize(
    "text",
    [
        'Repeat exactly: it\'s "quoted" & <tagged>',
        "Copy this line: Tom's cat & Ann's dog say \"hi\"",
    ],
)
async def test_no_html_entity_reaches_an_answer(llm: OpenAICompatibleLLM, text: str):
    """What the model reads is what the user typed: it cannot copy ``&#39;`` or ``&amp;``
    into an answer (with chatml-function-calling it did, from its escaped prompt)."""
    reply = await llm.chat(user(text), max_tokens=40)
    assert not re.search(r"&(#\d+|#x[0-9a-f]+|amp|quot|lt|gt|apos);", reply.content, re.I), (
        reply.content
    )
