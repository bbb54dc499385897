"""Sync views in pooled threads with one hand-off each way.

a2wsgi runs the WSGI application in a pooled thread and hands every step back to the
event loop, waiting each time for the loop to take it: the request body (a round trip per
chunk), the response start, each body chunk and the end of the body (a round trip
each). A message POST made five round trips, ten thread switches, each also waiting for
a busy loop's next turn. Here a request with a small body has it read on the loop before
the thread starts, and a response that is not streamed is collected in the thread and
sent from the loop once the thread is done: one switch there, one back. Streaming
responses (files, ``StreamingHttpResponse``) go out chunk by chunk as a2wsgi sends them,
and requests with a large or unsized body take a2wsgi's path unchanged.
"""

from __future__ import annotations

import contextvars
import functools
import io
import itertools
from typing import Any

from a2wsgi import WSGIMiddleware
from a2wsgi.wsgi import WSGIResponder, build_environ

# Bodies up to this size are read on the loop before the view runs (daphne has already
# received them whole); larger ones are read by the view as it needs them.
PREREAD_LIMIT = 1 << 20

Buffered = tuple[int, list[tuple[bytes, bytes]], bytes]


class BufferedWSGIMiddleware(WSGIMiddleware):
    """a2wsgi's ``WSGIMiddleware`` with :class:`BufferedResponder` for HTTP requests
    whose body can be read up front."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not _body_fits(scope):
            return await super().__call__(scope, receive, send)
        body = await _read_body(receive)
        if body is None:  # the client went away before the body arrived
            return None
        responder = BufferedResponder(self.app, self.executor, self.send_queue_size)
        return await responder.respond(scope, body, send)


class BufferedResponder(WSGIResponder):
    """Runs the application on a body already read; keeps a response that is not
    streamed in the thread and sends it after (a2wsgi's per-message sends otherwise)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._start: tuple[int, list[tuple[bytes, bytes]]] | None = None
        self._written: list[bytes] = []

    async def respond(self, scope: Any, body: bytes, send: Any) -> None:
        environ = build_environ(scope, io.BytesIO(body))  # type: ignore[arg-type]
        sender = self.loop.create_task(self.sender(send))
        try:
            run = functools.partial(contextvars.copy_context().run, self._run)
            buffered = await self.loop.run_in_executor(self.executor, run, environ)
            await self.send_queue.put(None)
            await sender
            if self.exc_info is not None:
                raise self.exc_info[0].with_traceback(self.exc_info[1], self.exc_info[2])
            if buffered is not None:
                status, headers, content = buffered
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": content})
        finally:
            if not sender.done():
                sender.cancel()

    def start_response(self, status: str, response_headers: Any, exc_info: Any = None) -> Any:
        """Keep the start until the application returns (then it is known whether the
        response streams)."""
        self.exc_info = exc_info
        if self._start is None or exc_info is not None:  # an error page replaces the start
            code = int(status.split(" ", 1)[0])
            headers = [
                (name.strip().encode("latin1").lower(), value.strip().encode("latin1"))
                for name, value in response_headers
            ]
            self._start = (code, headers)
        return self._written.append

    def _run(self, environ: dict[str, Any]) -> Buffered | None:
        """In the pooled thread: the whole response, or None once it has been streamed."""
        iterable = self.app(environ, self.start_response)
        try:
            if self._start is None:
                raise RuntimeError("the WSGI application returned without start_response()")
            if getattr(iterable, "streaming", True) is False:  # Django's HttpResponse
                return (*self._start, b"".join([*self._written, *iterable]))
            status, headers = self._start
            self.send({"type": "http.response.start", "status": status, "headers": headers})
            for chunk in itertools.chain(self._written, iterable):  # as the view yields them
                self.send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.send({"type": "http.response.body", "body": b""})
            return None
        finally:
            getattr(iterable, "close", lambda: None)()


def _body_fits(scope: Any) -> bool:
    """Whether the body is known to be small: a Content-Length within the limit, or no
    body announced at all (no length, not chunked)."""
    length = None
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            return False
    if length is None:
        return True
    try:
        return int(length) <= PREREAD_LIMIT
    except ValueError:
        return False


async def _read_body(receive: Any) -> bytes | None:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)
