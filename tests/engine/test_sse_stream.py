"""Server-sent events are read correctly however the bytes arrive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

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


async def test_crlf_stream_in_pieces_through_the_real_client():
    """A raw HTTP/1.1 server writes a chunked CRLF stream a few bytes at a time."""
    words = ["Hello", ", ", "wörld", "!"]
    sse = (
        "".join(
            "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": w}}]}) + "\r\n\r\n"
            for w in words
        )
        + "data: [DONE]\r\n\r\n"
    )
    body = sse.encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for piece in chunked(body, 7):
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    llm = OpenAICompatibleLLM(
        base_url=f"http://127.0.0.1:{port}/v1", api_key="k", model="m", max_retries=0
    )
    try:
        deltas = [d async for d in llm.stream_chat([ChatMessage("user", "hi")])]
    finally:
        await llm.aclose()
        server.close()
        await server.wait_closed()

    assert "".join(d.content for d in deltas if d.content) == "Hello, wörld!"
