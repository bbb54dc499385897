"""Fixtures for the API tests: tokens, a JSON client, a scripted LLM and an ASGI stream."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest


class JsonClient:
    """Django's test client speaking JSON with a bearer token (or none)."""

    def __init__(self, client, raw_token: str | None) -> None:
        self.client = client
        self.raw_token = raw_token

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.raw_token}"} if self.raw_token else {}
        return {**headers, **(extra or {})}

    def get(self, path: str, headers: dict[str, str] | None = None, **params: Any):
        return self.client.get(path, params, headers=self._headers(headers))

    def _send(self, method: str, path: str, body: Any, headers: dict[str, str] | None):
        data = body if isinstance(body, str | bytes) else json.dumps(body)
        call = getattr(self.client, method)
        return call(
            path, data=data, content_type="application/json", headers=self._headers(headers)
        )

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None):
        return self._send("post", path, {} if body is None else body, headers)

    def patch(self, path: str, body: Any = None, headers: dict[str, str] | None = None):
        return self._send("patch", path, {} if body is None else body, headers)

    def delete(self, path: str, headers: dict[str, str] | None = None):
        return self.client.delete(path, headers=self._headers(headers))


@pytest.fixture
def api(client, token) -> JsonClient:
    return JsonClient(client, token)


@pytest.fixture
def anon_api(client) -> JsonClient:
    return JsonClient(client, None)


# ------------------------------------------------------------------ runs through the API


@pytest.fixture
async def http(token):
    """An httpx client calling the ASGI application in-process, with the bearer token.

    At teardown it waits for the runs it started (they finish their bookkeeping after
    the ``done`` event), so no run outlives its test's database.
    """
    import httpx

    from agentsite.asgi import application
    from conversations.runs import launcher

    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://127.0.0.1",
        headers={"Authorization": f"Bearer {token}"},
    ) as client:
        client.run_ids = []  # type: ignore[attr-defined]
        yield client
        for run_id in client.run_ids:  # type: ignore[attr-defined]
            await asyncio.wait_for(launcher.wait_for(run_id), 10)


# ------------------------------------------------------------------ SSE over raw ASGI


@dataclass
class Event:
    id: int
    event: str
    data: Any  # the event's payload, as the log stores it
    branch: dict | None = None  # which run and branch it belongs to (the stream adds it)


HEARTBEAT = "heartbeat"


class SSEStream:
    """One GET against the real ASGI application, read frame by frame.

    Unlike a buffering test client it can read part of an endless stream and then hang
    up (``http.disconnect``), which is what a browser or ``curl`` does.
    """

    def __init__(self, path: str, *, token: str | None, headers: dict[str, str] | None = None):
        parts = urlsplit(path)
        raw_headers = [(b"host", b"127.0.0.1")]
        if token:
            raw_headers.append((b"authorization", f"Bearer {token}".encode()))
        for name, value in (headers or {}).items():
            raw_headers.append((name.lower().encode(), value.encode()))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": parts.path,
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": raw_headers,
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 80),
        }
        self._in: asyncio.Queue = asyncio.Queue()
        self._out: asyncio.Queue = asyncio.Queue()
        self._buffer = b""
        self.ended = False
        self.status = 0
        self.headers: dict[str, str] = {}
        self.task: asyncio.Task | None = None

    async def open(self, timeout: float = 10) -> SSEStream:
        from agentsite.asgi import application

        self._in.put_nowait({"type": "http.request", "body": b"", "more_body": False})
        self.task = asyncio.ensure_future(application(self.scope, self._in.get, self._out.put))
        start = await asyncio.wait_for(self._out.get(), timeout)
        assert start["type"] == "http.response.start", start
        self.status = start["status"]
        self.headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        return self

    async def body(self, timeout: float = 10) -> bytes:
        """The rest of a finite response body."""
        chunks = [self._buffer]
        self._buffer = b""
        while not self.ended:
            message = await asyncio.wait_for(self._out.get(), timeout)
            chunks.append(message.get("body", b""))
            self.ended = not message.get("more_body", False)
        return b"".join(chunks)

    async def next(self, timeout: float = 10) -> Event | str | None:
        """The next event, ``HEARTBEAT`` for a comment, or None when the stream ended."""
        while b"\n\n" not in self._buffer:
            if self.ended:
                return None
            message = await asyncio.wait_for(self._out.get(), timeout)
            self._buffer += message.get("body", b"")
            self.ended = not message.get("more_body", False)
        frame, self._buffer = self._buffer.split(b"\n\n", 1)
        fields: dict[str, str] = {}
        for line in frame.decode().split("\n"):
            if line.startswith(":"):
                return HEARTBEAT
            name, _, value = line.partition(": ")
            fields[name] = value
        data = json.loads(fields["data"])
        branch = data.pop("branch", None) if isinstance(data, dict) else None
        return Event(int(fields["id"]), fields["event"], data, branch)

    async def events_until(self, predicate, timeout: float = 10) -> list[Event]:
        """Events up to and including the first matching ``predicate``."""
        seen: list[Event] = []
        while True:
            item = await self.next(timeout)
            assert item is not None, f"stream ended before the expected event: {seen}"
            if item == HEARTBEAT:
                continue
            seen.append(item)
            if predicate(item):
                return seen

    async def rest(self, timeout: float = 10) -> list[Event]:
        """Every event until the stream ends by itself."""
        seen = []
        while (item := await self.next(timeout)) is not None:
            if item != HEARTBEAT:
                seen.append(item)
        await self.wait_closed(timeout)
        return seen

    async def wait_closed(self, timeout: float = 10) -> None:
        assert self.task is not None
        self._in.put_nowait({"type": "http.disconnect"})
        await asyncio.wait_for(self.task, timeout)

    async def disconnect(self, timeout: float = 10) -> None:
        """Hang up mid-stream, as a client closing the connection."""
        await self.wait_closed(timeout)


@pytest.fixture
async def sse():
    """Open SSE streams; any left open are hung up at the end of the test."""
    opened: list[SSEStream] = []

    async def open_stream(path: str, *, token: str | None, **kwargs: Any) -> SSEStream:
        stream = SSEStream(path, token=token, **kwargs)
        opened.append(stream)
        return await stream.open()

    yield open_stream
    for stream in opened:
        if stream.task is not None and not stream.task.done():
            await stream.disconnect()
