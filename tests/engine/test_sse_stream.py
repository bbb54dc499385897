"""Server-sent events are read correctly however the bytes arrive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from engine.llm.base import LLMError, StreamEndedEarly
from engine.llm.openai import OpenAICompatibleLLM, _iter_sse
from engine.messages import ChatMessage

STREAM = (
    ": keep-alive comment\r\n"
    "data: first\r\n\r\n"
    "data: two\r\ndata: lines\r\n\r\n"
    "data: caf\u00e9 \u2615\n\n"
    "event: ignored\rdata: cr only\r\r"
    'error: {"code": 500}\n\n'
    "data: no blank line at the end"
).encode()
EVENTS = [
    ("data", "first"),
    ("data", "two\nlines"),
    ("data", "caf\u00e9 \u2615"),
    ("data", "cr only"),
    ("error", '{"code": 500}'),
    ("data", "no blank line at the end"),
]


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def events_of(chunks: list[bytes]) -> list[tuple[str, str]]:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    response = httpx.Response(200, content=body())
    return [event async for event in _iter_sse(response)]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64, len(STREAM)])
async def test_events_are_the_same_for_every_chunking(size):
    assert await events_of(chunked(STREAM, size)) == EVENTS


async def test_a_crlf_split_between_chunks_is_one_line_end():
    chunks = [b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]
    assert await events_of(chunks) == [("data", "a\nb")]


def sse_of(words: list[str], end: str = "data: [DONE]\r\n\r\n") -> bytes:
    """Content chunks for ``words`` (no finish_reason), then ``end``."""
    events = (
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": w}}]}) + "\r\n\r\n"
        for w in words
    )
    return ("".join(events) + end).encode()


async def streamed_through(
    body: bytes, *, chunked_body: bool = True
) -> tuple[str, Exception | None]:
    """Serve ``body`` from a raw HTTP/1.1 server a few bytes at a time, then end it cleanly
    (the terminating chunk, or closing a close-delimited body); the text the real client
    yielded and the error it raised at the end (None: it ended as a whole reply)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        framing = b"transfer-encoding: chunked" if chunked_body else b"connection: close"
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n%s\r\n\r\n" % framing)
        for piece in chunked(body, 7):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked_body else piece)
            await writer.drain()
            await asyncio.sleep(0)
        if chunked_body:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    llm = OpenAICompatibleLLM(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m", max_retries=0
    )
    text, error = "", None
    try:
        async for delta in llm.stream_chat([ChatMessage("user", "hi")]):
            text += delta.content
    except LLMError as exc:
        error = exc
    finally:
        await llm.aclose()
        server.close()
        await server.wait_closed()
    return text, error


async def test_crlf_stream_in_pieces_through_the_real_client():
    """A raw HTTP/1.1 server writes a chunked CRLF stream a few bytes at a time."""
    text, error = await streamed_through(sse_of(["Hello", ", ", "wörld", "!"]))

    assert (text, error) == ("Hello, wörld!", None)


@pytest.mark.parametrize("chunked_body", [True, False], ids=["chunked", "close-delimited"])
async def test_a_body_that_ends_cleanly_mid_answer_is_a_cut_stream(chunked_body):
    """A proxy that gives up may still end the body properly: the text that came is
    yielded, then the missing end is an error, never a whole reply."""
    text, error = await streamed_through(
        sse_of(["Half ", "of it"], end=""), chunked_body=chunked_body
    )

    assert text == "Half of it"
    assert isinstance(error, StreamEndedEarly)


async def test_a_last_event_cut_mid_json_then_a_clean_end_is_a_cut_stream():
    final = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    text, error = await streamed_through(sse_of(["Half ", "of it"], end=f"data: {final[:20]}"))

    assert text == "Half of it"
    assert isinstance(error, StreamEndedEarly)
