"""OpenAICompatibleLLM against the real scripted server over loopback HTTP."""

from __future__ import annotations

import asyncio
import email.utils
import gc
import json
import socket
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from engine.llm.base import (
    LLM,
    AuthenticationError,
    BadRequestError,
    ChatDelta,
    ContextOverflowError,
    LLMTimeoutError,
    RateLimitError,
    UnavailableError,
)
from engine.llm.openai import (
    ConnectionPool,
    OpenAICompatibleLLM,
    decode_arguments,
    map_http_error,
    parse_retry_after,
)
from engine.messages import ChatMessage, ToolCall
from testing.scripted_server import ScriptedServer

USER = [ChatMessage("user", "What is the weather?")]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]

MakeLLM = Callable[..., OpenAICompatibleLLM]


@pytest.fixture
async def make_llm(scripted_server: ScriptedServer) -> AsyncIterator[MakeLLM]:
    """Build clients for the scripted server, sharing one connection pool as a process's
    runs do; fast backoff; all closed at teardown."""
    made: list[OpenAICompatibleLLM] = []
    pool = ConnectionPool()

    def make(**kwargs: object) -> OpenAICompatibleLLM:
        options: dict = {
            "base_url": scripted_server.base_url,
            "api_key": "sk-test",
            "model": "test-model",
            "max_retries": 0,
            "transport": pool.lend(),
        }
        options.update(kwargs)
        llm = OpenAICompatibleLLM(**options)
        llm.backoff_base = 0.01
        made.append(llm)
        return llm

    yield make
    for llm in made:
        await llm.aclose()
    await pool.aclose()


async def collect(stream: AsyncIterator[ChatDelta]) -> list[ChatDelta]:
    return [delta async for delta in stream]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------ non-streaming chat


async def test_chat_returns_content_and_reported_usage(scripted_server, make_llm):
    scripted_server.push(
        {"content": "Sunny, 21 °C.", "usage": {"prompt_tokens": 11, "completion_tokens": 3}}
    )
    llm = make_llm()

    response = await llm.chat(USER)

    assert response.content == "Sunny, 21 °C."
    assert response.tool_calls == []
    assert response.finish_reason == "stop"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (11, 3)
    assert response.usage.total_tokens == 14
    assert response.usage.estimated is False
    sent = scripted_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent["model"] == "test-model"
    assert sent["messages"] == [{"role": "user", "content": "What is the weather?"}]
    assert "stream" not in sent
    assert sent.headers["authorization"] == "Bearer sk-test"


async def test_tools_tool_choice_response_format_and_options_pass_through(
    scripted_server, make_llm
):
    scripted_server.push("ok")
    llm = make_llm(
        default_params={"temperature": 0.7, "top_p": 0.9},
        extra_headers={"X-Team": "blue"},
    )
    choice = {"type": "function", "function": {"name": "weather"}}

    await llm.chat(
        USER,
        tools=TOOLS,
        tool_choice=choice,
        response_format={"type": "json_object"},
        temperature=0.1,
        max_tokens=64,
        seed=None,
    )

    sent = scripted_server.requests[0]
    assert sent["tools"] == TOOLS
    assert sent["tool_choice"] == choice
    assert sent["response_format"] == {"type": "json_object"}
    assert sent["temperature"] == 0.1  # call options override default_params
    assert sent["top_p"] == 0.9
    assert sent["max_tokens"] == 64
    assert "seed" not in sent  # None options are dropped
    assert sent.headers["x-team"] == "blue"


async def test_optional_fields_are_omitted_when_not_given(scripted_server, make_llm):
    scripted_server.push("ok")
    await make_llm().chat(USER)
    sent = scripted_server.requests[0]
    assert not {"tools", "tool_choice", "response_format"} & set(sent)


async def test_assistant_tool_call_message_is_sent_with_empty_content(scripted_server, make_llm):
    scripted_server.push("It is sunny.")
    call = ToolCall(id="call_1", name="weather", arguments={"city": "Oslo"})
    history = [
        *USER,
        ChatMessage("assistant", None, tool_calls=[call]),
        ChatMessage("tool", "sunny", tool_call_id="call_1", name="weather"),
    ]

    await make_llm().chat(history, tools=TOOLS)

    assistant, tool = scripted_server.requests[0]["messages"][1:]
    assert assistant["content"] == ""
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
        }
    ]
    assert tool == {"role": "tool", "content": "sunny", "tool_call_id": "call_1", "name": "weather"}


async def test_tool_calls_are_parsed_and_arguments_decoded(scripted_server, make_llm):
    scripted_server.push(
        {
            "tool_calls": [
                {"id": "call_a", "name": "weather", "arguments": {"city": "Oslo"}},
                {"id": "call_b", "name": "weather", "arguments": "{'city': 'Bergen',}"},
                {"id": "call_c", "name": "noop", "arguments": ""},
                {"id": "call_d", "name": "weather", "arguments": "sunny please"},
            ]
        }
    )

    response = await make_llm().chat(USER, tools=TOOLS)

    assert response.finish_reason == "tool_calls"
    assert response.content == ""  # null content on the wire
    assert response.tool_calls == [
        ToolCall("call_a", "weather", {"city": "Oslo"}),
        ToolCall("call_b", "weather", {"city": "Bergen"}),  # repaired
        ToolCall("call_c", "noop", {}),
        ToolCall("call_d", "weather", {"__raw__": "sunny please"}),  # kept raw
    ]


async def test_reasoning_content_is_surfaced(scripted_server, make_llm):
    scripted_server.push({"content": "42", "reasoning_content": "Six times seven."})
    response = await make_llm().chat(USER)
    assert response.reasoning_content == "Six times seven."
    assert response.content == "42"


async def test_usage_is_estimated_when_the_server_reports_none(scripted_server, make_llm):
    scripted_server.push({"content": "A fairly long answer about the weather.", "usage": None})
    response = await make_llm().chat(USER)
    assert response.usage.estimated is True
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


def test_abilities_are_merged_over_defaults():
    llm = OpenAICompatibleLLM("http://127.0.0.1:1/v1", None, "m", {"tool_call": True})
    assert llm.abilities["tool_call"] is True
    assert llm.abilities["streaming"] is True
    assert llm.abilities["json_mode"] is False
    assert isinstance(llm, LLM)


@pytest.mark.filterwarnings("ignore:unclosed:ResourceWarning")
def test_client_works_from_successive_event_loops(scripted_server):
    """A cached client (e.g. one event loop per Celery task) must not reuse a dead loop.

    The first loop's client is abandoned, not closed (its loop is gone): callers should
    still ``aclose()`` at the end of a run; this is the safety net.
    """
    scripted_server.push("one", "two")
    llm = OpenAICompatibleLLM(scripted_server.base_url, None, "m", max_retries=0)
    for expected in ("one", "two"):
        loop = asyncio.new_event_loop()
        try:
            assert loop.run_until_complete(llm.chat(USER)).content == expected
        finally:
            if expected == "two":
                loop.run_until_complete(llm.aclose())
            loop.close()
    gc.collect()  # the abandoned connection's warning lands here, not in a later test


# -------------------------------------------------------------------------- streaming


async def test_stream_yields_content_deltas_in_order(scripted_server, make_llm):
    scripted_server.push({"chunks": ["Hel", "lo", ", wor", "ld"]})

    deltas = await collect(make_llm().stream_chat(USER, temperature=0))

    assert [d.content for d in deltas[:-1]] == ["Hel", "lo", ", wor", "ld"]
    final = deltas[-1]
    assert final.content == ""
    assert final.tool_calls is None
    assert final.finish_reason == "stop"
    sent = scripted_server.requests[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["temperature"] == 0


async def test_stream_surfaces_reasoning_before_content(scripted_server, make_llm):
    scripted_server.push({"reasoning_content": "Let me think.", "content": "Done."})
    deltas = await collect(make_llm().stream_chat(USER))
    assert "".join(d.reasoning_content for d in deltas) == "Let me think."
    assert "".join(d.content for d in deltas) == "Done."
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not d.reasoning_content for d in deltas[first_content:])


async def test_non_text_content_in_a_stream_never_reaches_the_answer(scripted_server, make_llm):
    """A provider that streams a number or an object as ``content``: not text, dropped."""
    scripted_server.push({"chunks": ["Hello ", 42, {"type": "image"}, True, "world."]})
    deltas = await collect(make_llm().stream_chat(USER))
    assert "".join(d.content for d in deltas) == "Hello world."


async def test_non_text_content_in_a_reply_is_not_shown_as_text(scripted_server, make_llm):
    scripted_server.push({"content": {"unexpected": "object"}, "usage": {"completion_tokens": 1}})
    reply = await make_llm().chat(USER)
    assert reply.content == ""


@pytest.mark.parametrize("repeat_ids", [False, True], ids=["openai-style", "llama.cpp-style"])
async def test_stream_assembles_fragmented_tool_calls(scripted_server, make_llm, repeat_ids):
    scripted_server.push(
        {
            "repeat_tool_ids": repeat_ids,
            "tool_calls": [
                {"id": "call_x", "name": "weather", "arguments": {"city": "Trondheim"}},
                {"id": "call_y", "name": "search", "arguments": {"query": "fjords", "n": 3}},
            ],
        }
    )

    deltas = await collect(make_llm().stream_chat(USER, tools=TOOLS))

    assert all(d.tool_calls is None for d in deltas[:-1])
    final = deltas[-1]
    assert final.finish_reason == "tool_calls"
    assert final.tool_calls == [
        ToolCall("call_x", "weather", {"city": "Trondheim"}),
        ToolCall("call_y", "search", {"query": "fjords", "n": 3}),
    ]
    assert scripted_server.requests[0]["tools"] == TOOLS


async def test_stream_usage_comes_from_the_final_chunk(scripted_server, make_llm):
    scripted_server.push({"content": "hi", "usage": {"prompt_tokens": 7, "completion_tokens": 2}})
    deltas = await collect(make_llm().stream_chat(USER))
    assert deltas[-1].usage is not None
    assert deltas[-1].usage.to_dict() == {
        "prompt_tokens": 7,
        "completion_tokens": 2,
        "total_tokens": 9,
    }
    assert deltas[-1].usage.estimated is False
    assert all(d.usage is None for d in deltas[:-1])


async def test_stream_usage_is_estimated_when_absent(scripted_server, make_llm):
    scripted_server.push({"content": "no usage from this server", "usage": None})
    deltas = await collect(make_llm().stream_chat(USER))
    usage = deltas[-1].usage
    assert usage is not None and usage.estimated is True
    assert usage.completion_tokens > 0 and usage.prompt_tokens > 0


async def test_stream_is_retried_when_nothing_was_yielded(scripted_server, make_llm):
    scripted_server.push({"status": 503}, {"content": "recovered"})
    deltas = await collect(make_llm(max_retries=2).stream_chat(USER))
    assert "".join(d.content for d in deltas) == "recovered"
    assert len(scripted_server.requests) == 2


async def test_stream_error_status_is_mapped(scripted_server, make_llm):
    scripted_server.push({"status": 401, "error_body": {"error": "bad key"}})
    with pytest.raises(AuthenticationError, match="bad key"):
        await collect(make_llm(max_retries=3).stream_chat(USER))
    assert len(scripted_server.requests) == 1


# ---------------------------------------------------------------------- cancellation


async def test_cancelling_the_consumer_closes_the_stream(scripted_server, make_llm):
    scripted_server.push({"content": "first then silence", "hang": 30})
    llm = make_llm()
    first = asyncio.Event()
    received: list[str] = []

    async def consume() -> None:
        async for delta in llm.stream_chat(USER):
            received.append(delta.content)
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), timeout=5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert time.monotonic() - started < 1.0
    assert received == ["first "]
    assert await asyncio.to_thread(scripted_server.wait_for_disconnect, 5.0)


async def test_closing_the_generator_closes_the_stream(scripted_server, make_llm):
    scripted_server.push({"content": "first then silence", "hang": 30})
    stream = make_llm().stream_chat(USER)

    first = await asyncio.wait_for(anext(stream), timeout=5)
    started = time.monotonic()
    await stream.aclose()

    assert first.content == "first "
    assert time.monotonic() - started < 1.0
    assert await asyncio.to_thread(scripted_server.wait_for_disconnect, 5.0)


async def test_cancelling_a_pending_chat_closes_the_request(scripted_server, make_llm):
    scripted_server.push({"content": "too late", "delay": 30})
    task = asyncio.create_task(make_llm().chat(USER))
    assert await asyncio.to_thread(scripted_server.wait_for_requests, 1, 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(scripted_server.wait_for_disconnect, 5.0)


# ------------------------------------------------------------------- errors, retries


async def test_429_is_retried_after_retry_after(scripted_server, make_llm):
    scripted_server.push({"status": 429, "headers": {"Retry-After": "0.2"}}, {"content": "ok"})

    response = await make_llm(max_retries=3).chat(USER)

    assert response.content == "ok"
    first, second = scripted_server.requests
    assert second.time - first.time >= 0.2


async def test_429_exhausting_retries_raises_rate_limit_error(scripted_server, make_llm):
    scripted_server.set_default({"status": 429, "headers": {"Retry-After": "0"}})
    with pytest.raises(RateLimitError) as caught:
        await make_llm(max_retries=2).chat(USER)
    assert caught.value.retry_after == 0
    assert caught.value.retryable is True
    assert len(scripted_server.requests) == 3


async def test_500_then_success(scripted_server, make_llm):
    scripted_server.push({"status": 500}, {"content": "second time lucky"})
    response = await make_llm(max_retries=3).chat(USER)
    assert response.content == "second time lucky"
    assert len(scripted_server.requests) == 2


async def test_persistent_5xx_raises_unavailable_after_max_retries(scripted_server, make_llm):
    scripted_server.set_default({"status": 503, "error_body": {"error": {"message": "overload"}}})
    with pytest.raises(UnavailableError, match="overload") as caught:
        await make_llm(max_retries=2).chat(USER)
    assert caught.value.status_code == 503
    assert len(scripted_server.requests) == 3


async def test_401_is_not_retried_and_maps_to_authentication_error(make_llm):
    with ScriptedServer(["never sent"], api_key="the-right-key") as server:
        llm = make_llm(base_url=server.base_url, api_key="wrong-key", max_retries=3)
        with pytest.raises(AuthenticationError, match="Invalid API key") as caught:
            await llm.chat(USER)
        assert caught.value.status_code == 401
        assert caught.value.retryable is False
        assert len(server.requests) == 1


async def test_400_context_length_exceeded_maps_to_context_overflow(scripted_server, make_llm):
    body = {
        "error": {
            "message": "This model's maximum context length is 8192 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    scripted_server.push({"status": 400, "error_body": body})
    with pytest.raises(ContextOverflowError) as caught:
        await make_llm(max_retries=3).chat(USER)
    assert isinstance(caught.value, BadRequestError)
    assert caught.value.status_code == 400
    assert len(scripted_server.requests) == 1


async def test_detail_body_message_is_surfaced(scripted_server, make_llm):
    scripted_server.push({"status": 401, "error_body": {"detail": "Token has expired"}})
    with pytest.raises(AuthenticationError, match="Token has expired"):
        await make_llm().chat(USER)


async def test_timeout_maps_to_llm_timeout_error(scripted_server, make_llm):
    scripted_server.push({"content": "slow", "delay": 2})
    started = time.monotonic()
    with pytest.raises(LLMTimeoutError):
        await make_llm(timeout=0.2, max_retries=0).chat(USER)
    assert time.monotonic() - started < 1.5


async def test_connection_refused_maps_to_unavailable(make_llm):
    llm = make_llm(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0)
    with pytest.raises(UnavailableError):
        await llm.chat(USER)
    with pytest.raises(UnavailableError):
        await collect(llm.stream_chat(USER))


async def test_api_key_never_appears_in_repr_or_errors(scripted_server, make_llm):
    secret = "sk-live-SECRET-1234567890"
    echo = {"error": {"message": f"Incorrect API key provided: {secret}", "code": "invalid_key"}}
    scripted_server.push({"status": 401, "error_body": echo}, {"status": 503, "error_body": echo})
    llm = make_llm(api_key=secret)

    assert secret not in repr(llm)
    with pytest.raises(AuthenticationError) as auth:
        await llm.chat(USER)
    with pytest.raises(UnavailableError) as unavailable:
        await collect(llm.stream_chat(USER))
    for error in (auth.value, unavailable.value):
        assert secret not in str(error)
        assert secret not in repr(error)
        assert "[redacted]" in str(error)


# -------------------------------------------- odd servers (httpx's own mock transport)


def _sse(*events: str) -> bytes:
    return "".join(f"{event}\n\n" for event in events).encode()


async def test_llama_cpp_error_event_in_stream_is_mapped():
    def handler(request: httpx.Request) -> httpx.Response:
        body = _sse(
            'error: {"code": 400, "message": "the request exceeds the available context size"}'
        )
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    llm = OpenAICompatibleLLM(
        "http://llama/v1", None, "m", max_retries=0, transport=httpx.MockTransport(handler)
    )
    async with llm:
        with pytest.raises(ContextOverflowError):
            await collect(llm.stream_chat(USER))


async def test_stream_request_answered_with_plain_json_is_replayed():
    def handler(request: httpx.Request) -> httpx.Response:
        message = {"role": "assistant", "content": "whole"}
        return httpx.Response(
            200, json={"choices": [{"message": message, "finish_reason": "stop"}]}
        )

    transport = httpx.MockTransport(handler)
    async with OpenAICompatibleLLM("http://x/v1", None, "m", transport=transport) as llm:
        deltas = await collect(llm.stream_chat(USER))
    assert [d.content for d in deltas] == ["whole", ""]
    assert deltas[-1].finish_reason == "stop"
    assert deltas[-1].usage is not None and deltas[-1].usage.estimated


async def test_error_inside_a_200_body_is_mapped():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": {"message": "model not loaded", "code": 503}})

    transport = httpx.MockTransport(handler)
    async with OpenAICompatibleLLM(
        "http://x/v1", None, "m", max_retries=0, transport=transport
    ) as llm:
        with pytest.raises(UnavailableError, match="model not loaded"):
            await llm.chat(USER)


# ------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"error": {"message": "no"}}, AuthenticationError),
        (403, {"error": "forbidden"}, AuthenticationError),
        (429, {"error": {"message": "slow down"}}, RateLimitError),
        (400, {"error": {"message": "bad tool_choice"}}, BadRequestError),
        (404, {"detail": "model not found"}, BadRequestError),
        (413, "payload too large", BadRequestError),
        (422, {"detail": [{"loc": ["body"], "msg": "field required"}]}, BadRequestError),
        (400, {"error": {"message": "x", "code": "context_length_exceeded"}}, ContextOverflowError),
        (
            400,
            {"object": "error", "message": "This model's maximum context length is 4096 tokens"},
            ContextOverflowError,
        ),
        (400, {"error": {"message": "prompt exceeds the context window"}}, ContextOverflowError),
        (
            400,
            {"error": {"message": "the request exceeds the available context size"}},
            ContextOverflowError,
        ),
        (500, {"error": "input is too large to process. increase n_ctx"}, ContextOverflowError),
        (500, "Internal Server Error", UnavailableError),
        (502, "<html>bad gateway</html>", UnavailableError),
        (503, {"error": {"message": "loading model"}}, UnavailableError),
    ],
)
def test_map_http_error(status, body, expected):
    error = map_http_error(status, json.dumps(body) if isinstance(body, dict) else body)
    assert type(error) is expected
    assert error.status_code == status
    assert str(status) in str(error)


def test_map_http_error_reads_message_shapes():
    assert "kaput" in str(map_http_error(400, {"error": {"message": "kaput"}}))
    assert "kaput" in str(map_http_error(400, {"error": "kaput"}))
    assert "kaput" in str(map_http_error(400, {"detail": "kaput"}))
    assert "kaput" in str(map_http_error(400, b"kaput"))


def test_parse_retry_after_accepts_seconds_and_http_dates():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= parse_retry_after({"Retry-After": future}) <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert parse_retry_after({"Retry-After": past}) == 0.0


def test_retry_delay_honours_retry_after_with_a_cap_and_backs_off_otherwise():
    llm = OpenAICompatibleLLM("http://x/v1", None, "m")
    assert llm._retry_delay(0, RateLimitError("x", retry_after=2.5)) == 2.5
    assert llm._retry_delay(0, RateLimitError("x", retry_after=3600)) == llm.retry_after_cap
    delays = [llm._retry_delay(n, UnavailableError("x")) for n in range(8)]
    assert 0.25 <= delays[0] <= 0.5
    assert all(d <= llm.backoff_cap for d in delays)
    assert delays[-1] >= llm.backoff_cap / 2


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ({"a": 1}, {"a": 1}),
        ("", {}),
        (None, {}),
        ('{"a": 1,}', {"a": 1}),
        ("[1, 2]", {"__raw__": "[1, 2]"}),
        ("plain words", {"__raw__": "plain words"}),
    ],
)
def test_decode_arguments(raw, expected):
    assert decode_arguments(raw) == expected


async def test_clients_built_one_after_another_reuse_the_providers_connection(
    scripted_server, make_llm
):
    """Each run builds its own client; the connection (and TLS session) to the provider is
    kept for the next run instead of being opened again."""
    scripted_server.push("first", "second")
    first = make_llm()
    assert (await first.chat(USER)).content == "first"
    await first.aclose()  # the run ended
    second = make_llm()
    assert (await second.chat(USER)).content == "second"
    await second.aclose()
    assert_one_connection(scripted_server, requests=2)


async def test_a_streamed_answer_leaves_its_connection_for_the_next_run(scripted_server, make_llm):
    """A run ends with the streamed answer; the next run's first call must not open a new
    connection (to a real provider: a new TCP and TLS handshake on every message)."""
    scripted_server.push({"content": "streamed answer", "chunks": ["streamed ", "answer"]}, "next")
    first = make_llm()
    deltas = await _collect(first.stream_chat(USER))
    assert "".join(d.content for d in deltas) == "streamed answer"
    assert deltas[-1].finish_reason == "stop"
    await first.aclose()
    second = make_llm()
    assert (await second.chat(USER)).content == "next"
    await second.aclose()
    assert_one_connection(scripted_server, requests=2)


async def test_a_stream_left_open_after_done_still_ends_the_answer(scripted_server, make_llm):
    """A server that keeps the response open after ``[DONE]`` must not hold the answer back:
    the client waits only briefly for the body's end, then drops that connection."""
    scripted_server.push({"content": "answer", "hang_after_done": 30})
    llm = make_llm()
    deltas = await asyncio.wait_for(_collect(llm.stream_chat(USER)), 10)  # not the 30 s
    assert "".join(d.content for d in deltas) == "answer"
    assert deltas[-1].finish_reason == "stop"


async def _collect(deltas: AsyncIterator[ChatDelta]) -> list[ChatDelta]:
    return [delta async for delta in deltas]


def assert_one_connection(server: ScriptedServer, *, requests: int) -> None:
    """The server saw ``requests`` requests, all on one TCP connection (one client port)."""
    peers = [request.peer for request in server.requests]
    assert len(peers) == requests and len(set(peers)) == 1, peers


async def test_more_concurrent_streams_than_httpx_default_pool_all_reach_the_provider(
    scripted_server, make_llm
):
    """The shared pool must not cap concurrent runs (httpx's default allows 100)."""
    streams = 110
    scripted_server.push(*[{"content": "late", "delay": 30} for _ in range(streams)])
    llms = [make_llm() for _ in range(streams)]
    calls = [asyncio.ensure_future(llm.chat(USER)) for llm in llms]
    try:
        assert await asyncio.to_thread(scripted_server.wait_for_requests, streams, 20)
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        for llm in llms:
            await llm.aclose()
