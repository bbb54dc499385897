"""The WSGI bridge under daphne (agentsite.wsgibridge), driven with ASGI messages: what
the view receives and what goes back to the server, message by message."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from django.http import HttpResponse, StreamingHttpResponse

from agentsite.wsgibridge import PREREAD_LIMIT, BufferedWSGIMiddleware


def scope(method: str = "POST", headers: Iterable[tuple[bytes, bytes]] = ()) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "path": "/echo/",
        "root_path": "",
        "query_string": b"",
        "http_version": "1.1",
        "headers": list(headers),
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
    }


async def call(
    app: Callable,
    request_scope: dict[str, Any],
    messages: list[dict[str, Any]],
    on_send: Callable[[dict[str, Any]], Any] = lambda message: None,
) -> list[dict[str, Any]]:
    """Run one request through the bridge; returns what it sent to the server."""
    pending = list(messages)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if pending:
            return pending.pop(0)
        await asyncio.sleep(3600)  # like a server: nothing more until the client acts
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        on_send(message)

    bridge = BufferedWSGIMiddleware(app, workers=2)
    try:
        await asyncio.wait_for(bridge(request_scope, receive, send), 10)
    finally:
        bridge.executor.shutdown(wait=True)
    return sent


def echo(response_class=HttpResponse) -> Callable:
    """A WSGI app answering with the request body's length and first bytes."""

    def app(environ: dict[str, Any], start_response: Callable) -> Any:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return response_class(f"{len(body)}:{body[:10].decode()}")

    return app


def body_messages(data: bytes, parts: int = 1) -> list[dict[str, Any]]:
    size = max(1, len(data) // parts)
    chunks = [data[i : i + size] for i in range(0, len(data), size)] or [b""]
    return [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]


def length_header(data: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"content-length", str(len(data)).encode())]


async def test_a_form_post_is_answered_in_one_start_and_one_body_message():
    data = b"content=hello&x=1"
    sent = await call(echo(), scope(headers=length_header(data)), body_messages(data))

    assert sent == [
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/plain")],
        },
        {"type": "http.response.body", "body": b"17:content=he"},
    ]


async def test_a_body_in_several_messages_reaches_the_view_whole():
    data = bytes(range(97, 123)) * 100
    sent = await call(echo(), scope(headers=length_header(data)), body_messages(data, parts=7))

    assert sent[-1]["body"] == b"2600:abcdefghij"


async def test_a_request_without_a_body_is_served():
    sent = await call(echo(), scope("GET"), [{"type": "http.request", "body": b""}])

    assert sent[-1] == {"type": "http.response.body", "body": b"0:"}


async def test_a_large_body_is_read_by_the_view_as_it_goes():
    data = b"z" * (PREREAD_LIMIT + 1)
    sent = await call(echo(), scope(headers=length_header(data)), body_messages(data, parts=9))

    assert b"".join(m.get("body", b"") for m in sent[1:]) == f"{len(data)}:zzzzzzzzzz".encode()


async def test_a_streamed_response_goes_out_chunk_by_chunk():
    def app(environ: dict[str, Any], start_response: Callable) -> Any:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return StreamingHttpResponse(iter([b"one", b"two", b"three"]))

    sent = await call(app, scope("GET"), [{"type": "http.request", "body": b""}])

    assert [m["type"] for m in sent] == ["http.response.start"] + ["http.response.body"] * 4
    assert [m.get("body") for m in sent[1:]] == [b"one", b"two", b"three", b""]
    assert [m.get("more_body", False) for m in sent[1:]] == [True, True, True, False]


async def test_a_streamed_chunk_leaves_before_the_view_produces_the_next():
    """A stream is never collected first (a large file, a long event stream)."""
    first_sent = threading.Event()

    def chunks() -> Iterator[bytes]:
        yield b"first"
        if not first_sent.wait(5):
            raise AssertionError("the first chunk was held back")
        yield b"second"

    def app(environ: dict[str, Any], start_response: Callable) -> Any:
        start_response("200 OK", [("Content-Type", "text/plain")])
        return StreamingHttpResponse(chunks())

    sent = await call(
        app,
        scope("GET"),
        [{"type": "http.request", "body": b""}],
        on_send=lambda m: m.get("body") == b"first" and first_sent.set(),
    )

    assert [m.get("body") for m in sent[1:]] == [b"first", b"second", b""]


async def test_a_client_gone_before_its_body_arrived_never_reaches_the_view():
    def app(environ: dict[str, Any], start_response: Callable) -> Any:
        raise AssertionError("the view ran for a client that left")

    data = b"abc"
    sent = await call(app, scope(headers=length_header(data)), [{"type": "http.disconnect"}])

    assert sent == []


async def test_a_view_error_reaches_the_server():
    """As with a2wsgi: the exception propagates, and daphne answers 500."""

    def app(environ: dict[str, Any], start_response: Callable) -> Any:
        raise ValueError("broken view")

    with pytest.raises(ValueError, match="broken view"):
        await call(app, scope("GET"), [{"type": "http.request", "body": b""}])
