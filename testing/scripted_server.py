"""A scripted OpenAI-compatible HTTP server for tests, benchmarks and demos.

The real client (:class:`engine.llm.openai.OpenAICompatibleLLM`) talks to it over loopback,
so tests exercise real HTTP, SSE, errors, delays and disconnects without a model. Standard
library only, so any process (the web server in an end-to-end test, a benchmark) can run
it: ``python -m testing.scripted_server --port 8090 [--script file.json] [--api-key K]``.

A script is a list of response dicts consumed in order. Keys (all optional):

- ``content`` (str), ``reasoning_content`` (str), ``finish_reason`` (``None`` sends
  ``null`` on the last chunk), ``done`` (``false``: no ``data: [DONE]`` line; with
  ``finish_reason: None`` the body ends cleanly without saying the reply is complete)
- ``tool_calls``: ``[{"name", "arguments": dict or str, "id"?}]`` (a str is sent as is,
  so invalid JSON can be scripted)
- ``usage``: ``{prompt_tokens, completion_tokens}``; ``None`` omits usage; absent = a
  rough count
- ``status`` (>= 400 answers an error), ``error_body`` (its JSON body, or a str),
  ``headers`` (extra response headers, e.g. ``{"Retry-After": "1"}``)
- ``delay`` (seconds before answering), ``chunks`` (content pieces when streaming;
  default: split into words), ``chunk_delay`` (seconds between streamed chunks),
  ``hang`` (seconds to stall after the first streamed piece), ``cut_after`` (close the
  connection after this many content pieces, mid-stream, without finishing the chunked
  body: a provider or proxy that dropped the stream), ``hang_after_done``
  (seconds to keep the response open after ``data: [DONE]``), ``repeat_tool_ids``
  (repeat id/name in every tool-call chunk, like llama.cpp), ``stamp_chunks``
  (append ``@@<time.monotonic()>@@`` to every streamed content piece as it is written,
  so a benchmark can measure delivery latency; ``--stamp`` turns it on for all responses),
  ``after_release`` (a name: the answer waits until ``POST /_release {"name": ...}``
  released it, so a test can order the server's work after something it observed
  instead of guessing a delay; released names stay released until ``reset``),
  ``pause_after`` with ``resume_on`` (a name: after that many content pieces the stream
  waits until ``POST /_release`` released the name, so a test acts mid-answer, e.g. stops
  the process streaming it, at a point it chose)

A bare string is shorthand for ``{"content": ...}``. Rules (``{"contains": text,
"response": {...}}`` or ``"responses": [...]`` consumed in order, optional ``"in"``:
``last_user`` (default) | ``last`` | ``any``) are checked against the request's messages
before the queue, so one server can serve several conversations deterministically. When
nothing matches and the queue is empty, the ``default`` response is used, else HTTP 500
"script exhausted".

Control endpoints: ``POST /_script`` ``{"responses", "rules", "default", "reset"}``,
``POST /_release`` ``{"name"}``, ``GET /_requests`` (recorded requests), ``GET /_state``
(``{"requests", "disconnects", "queued"}`` counts, for processes that cannot call
:meth:`ScriptedServer.wait_for_disconnect`), ``GET /v1/models``.

``POST /v1/embeddings`` answers OpenAI's embeddings format from a deterministic hashing
embedder (:mod:`testing.embeddings`; ``dimensions`` in the request, else
``embedding_dims``); the requests are kept apart in ``embedding_requests``, and
``embedding_status`` (e.g. 503) makes it fail, for tests of an embedding model that is down.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import select
import signal
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from testing import embeddings

__all__ = ["RecordedRequest", "ScriptedServer", "main"]

Response = dict[str, Any]
POLL_SECONDS = 0.02
STAMP_FORMAT = "@@{:.6f}@@"  # appended to streamed content pieces when stamping


class RecordedRequest(dict):  # type: ignore[type-arg]
    """A chat request's JSON body, plus ``path``, ``headers``, ``time``, ``answered``,
    ``ended``, ``peer``.

    ``time`` is ``time.monotonic()`` on arrival, ``answered`` when the answer was out (the
    whole body, or a stream's first content chunk): the difference is this server's own
    delay, which a benchmark subtracts. ``ended`` is when the body's last bytes went out
    (stamped just before them, so it is set once a client has read the end; None while it
    streams, or when it was cut), so a test can time what a client did after the end.
    ``headers`` has lower-cased names.
    """

    def __init__(
        self, body: dict[str, Any], *, path: str, headers: dict[str, str], peer: str = ""
    ) -> None:
        super().__init__(body)
        self.path = path
        self.headers = headers
        self.peer = peer  # the client's "host:port": one connection, one peer
        self.time = time.monotonic()
        self.answered: float | None = None
        self.ended: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "headers": self.headers,
            "time": self.time,
            "answered": self.answered,
            "ended": self.ended,
            "peer": self.peer,
            "body": dict(self),
        }


def _normalise(response: Response | str) -> Response:
    return {"content": response} if isinstance(response, str) else dict(response)


def _message_text(message: Any) -> str:
    """What rules match against: the text, and an image part's URL (a data URL carries the
    image: a rule can answer as a model that sees it)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(_part_text(p) for p in content if isinstance(p, dict))
    return content or ""


def _part_text(part: dict[str, Any]) -> str:
    image = part.get("image_url")
    if isinstance(image, dict):
        return str(image.get("url", ""))
    return str(part.get("text", ""))


class _Rule:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.contains = str(spec["contains"])
        self.scope = spec.get("in", "last_user")
        self.fixed = _normalise(spec["response"]) if "response" in spec else None
        self.queue = deque(_normalise(r) for r in spec.get("responses", ()))

    def matches(self, messages: Sequence[Any]) -> bool:
        if self.scope == "any":
            texts = [_message_text(m) for m in messages]
        elif self.scope == "last":
            texts = [_message_text(messages[-1])] if messages else []
        else:
            users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
            texts = [_message_text(users[-1])] if users else []
        return any(self.contains in text for text in texts)

    def take(self) -> Response | None:
        if self.queue:
            return self.queue.popleft()
        return self.fixed


class ScriptedServer:
    """A loopback OpenAI-compatible server answering from a script."""

    def __init__(
        self,
        script: Iterable[Response | str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        default: Response | str | None = None,
        model: str = "scripted-model",
        stamp: bool = False,
        embedding_dims: int = embeddings.DEFAULT_DIMS,
    ) -> None:
        self.host = host
        self.embedding_dims = embedding_dims
        self.embedding_status: int | None = None
        self.embedding_requests: list[dict[str, Any]] = []
        self.stamp = stamp
        self.port = port
        self.api_key = api_key
        self.model = model
        # What GET /v1/models lists (default: ``model``); a test may list several.
        self.listed_models: list[str] = [model]
        self.default: Response | None = _normalise(default) if default is not None else None
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Response] = deque(_normalise(r) for r in script or ())
        self._rules: list[_Rule] = []
        self._disconnects = 0
        self._released: set[str] = set()
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        httpd = _Server((self.host, self.port), _Handler)
        httpd.daemon_threads = True
        httpd.scripted = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self.port = httpd.server_address[1]
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-server-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()  # wakes handlers that are delaying or hanging
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else self.host
        return f"http://{host}:{self.port}/v1"

    # -- scripting

    def push(self, *responses: Response | str) -> None:
        """Queue responses, answered in order after those already queued."""
        with self._cond:
            self._queue.extend(_normalise(r) for r in responses)

    def set_rules(self, rules: Iterable[dict[str, Any]]) -> None:
        """Replace the ``contains`` rules checked before the queue."""
        compiled = [_Rule(spec) for spec in rules]
        with self._cond:
            self._rules = compiled

    def set_default(self, response: Response | str | None) -> None:
        with self._cond:
            self.default = _normalise(response) if response is not None else None

    def reset(self) -> None:
        """Forget the queue, rules, default, recorded requests and disconnects."""
        with self._cond:
            self._queue.clear()
            self._rules = []
            self.default = None
            self.requests.clear()
            self._disconnects = 0
            self._released.clear()
            self.embedding_requests.clear()
            self.embedding_status = None

    def configure(self, spec: dict[str, Any] | list[Any]) -> int:
        """Apply a ``/_script`` body (or a bare list of responses); returns the queue size."""
        if isinstance(spec, list):
            spec = {"responses": spec}
        if spec.get("reset"):
            self.reset()
        if "rules" in spec:
            self.set_rules(spec["rules"] or [])
        if "default" in spec:
            self.set_default(spec["default"])
        self.push(*spec.get("responses") or [])
        with self._cond:
            return len(self._queue)

    def release(self, name: str) -> None:
        """Let the responses scripted with ``after_release: name`` answer."""
        with self._cond:
            self._released.add(name)
            self._cond.notify_all()

    def _is_released(self, name: str) -> bool:
        with self._cond:
            return name in self._released

    # -- observation

    @property
    def disconnects(self) -> int:
        """How many clients went away while a response was pending or streaming."""
        with self._cond:
            return self._disconnects

    def wait_for_disconnect(self, timeout: float = 5.0, count: int = 1) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._disconnects >= count, timeout)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self.requests) >= count, timeout)

    def state(self) -> dict[str, int]:
        """Counts of recorded requests, client disconnects and queued responses."""
        with self._cond:
            return {
                "requests": len(self.requests),
                "disconnects": self._disconnects,
                "queued": len(self._queue),
            }

    # -- used by the handler

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self.requests.append(request)
            self._cond.notify_all()

    def _note_disconnect(self) -> None:
        with self._cond:
            self._disconnects += 1
            self._cond.notify_all()

    def _next_response(self, body: dict[str, Any]) -> Response | None:
        messages = body.get("messages") or []
        with self._cond:
            for rule in self._rules:
                if rule.matches(messages):
                    response = rule.take()
                    if response is not None:
                        return response
            if self._queue:
                return self._queue.popleft()
            return self.default

    def _next_id(self) -> int:
        with self._cond:
            return next(self._ids)


# ------------------------------------------------------------------------- rendering


def _split_words(text: str) -> list[str]:
    return re.findall(r"^\s+|\S+\s*", text)


def _fragments(text: str, parts: int = 3) -> list[str]:
    if not text:
        return [""]
    size = max(1, math.ceil(len(text) / parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _tool_calls(response: Response, request_no: int) -> list[tuple[str, str, str]]:
    """(id, name, arguments-as-text) per scripted call."""
    calls = []
    for i, call in enumerate(response.get("tool_calls") or []):
        args = call.get("arguments", {})
        text = args if isinstance(args, str) else json.dumps(args)
        calls.append((call.get("id") or f"call_{request_no}_{i}", call["name"], text))
    return calls


def _usage(request: dict[str, Any], response: Response) -> dict[str, int] | None:
    if "usage" in response:
        given = response["usage"]
        if given is None:
            return None
        usage = {k: int(given.get(k, 0)) for k in ("prompt_tokens", "completion_tokens")}
        usage["total_tokens"] = int(given.get("total_tokens") or sum(usage.values()))
        return usage
    produced = (response.get("content") or "") + (response.get("reasoning_content") or "")
    produced += "".join(c[2] for c in _tool_calls(response, 0))
    prompt = max(1, len(json.dumps(request.get("messages") or [])) // 4)
    completion = max(1, len(produced) // 4)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _finish_reason(response: Response) -> str | None:
    """The scripted ``finish_reason`` (``None``, scripted, sends ``null``) or the usual one."""
    if "finish_reason" in response:
        return response["finish_reason"]
    return "tool_calls" if response.get("tool_calls") else "stop"


def render_completion(
    request: dict[str, Any], response: Response, request_no: int, model: str
) -> dict[str, Any]:
    """The non-streamed ``chat.completion`` body for a scripted response."""
    calls = _tool_calls(response, request_no)
    content = response.get("content") or ""
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else "")}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
            for cid, name, args in calls
        ]
    if response.get("reasoning_content"):
        message["reasoning_content"] = response["reasoning_content"]
    body: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{request_no}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model") or model,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(response)}],
    }
    usage = _usage(request, response)
    if usage is not None:
        body["usage"] = usage
    return body


def render_chunks(
    request: dict[str, Any], response: Response, request_no: int, model: str
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects streaming a scripted response, in order."""
    base = {
        "id": f"chatcmpl-scripted-{request_no}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": request.get("model") or model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for piece in _split_words(response.get("reasoning_content") or ""):
        chunks.append(chunk({"reasoning_content": piece}))
    pieces = response.get("chunks")
    if pieces is None:
        pieces = _split_words(response.get("content") or "")
    chunks.extend(chunk({"content": piece}) for piece in pieces)
    repeat = bool(response.get("repeat_tool_ids"))
    for index, (cid, name, args) in enumerate(_tool_calls(response, request_no)):
        head = {"index": index, "id": cid, "type": "function"}
        opening = {**head, "function": {"name": name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [opening]}))
        for fragment in _fragments(args):
            function: dict[str, Any] = {"arguments": fragment}
            entry: dict[str, Any] = {"index": index, "function": function}
            if repeat:
                entry.update(head)
                function["name"] = name
            chunks.append(chunk({"tool_calls": [entry]}))
    chunks.append(chunk({}, _finish_reason(response)))
    usage = _usage(request, response)
    if usage is not None and (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks


# --------------------------------------------------------------------------- handler


class _Server(ThreadingHTTPServer):
    # Benchmarks open hundreds of streams at once; the default backlog of 5 reset them.
    request_queue_size = 512


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedServer/1.0"

    @property
    def scripted(self) -> ScriptedServer:
        return self.server.scripted  # type: ignore[attr-defined]

    def setup(self) -> None:
        super().setup()
        # Like real LLM servers: no Nagle delay. Without it the headers and the first chunk
        # (two small writes) met the client's delayed ACK: +40 ms on the first tokens.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - base signature
        """Quiet: tests read ``requests`` instead."""

    # -- plumbing

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, str):
            data, ctype = body.encode(), "text/plain; charset=utf-8"
        else:
            data, ctype = json.dumps(body).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw.strip() else {}

    def _wait(self, seconds: float) -> bool:
        """Sleep, but return False as soon as the client disconnects or the server stops."""
        deadline = time.monotonic() + float(seconds)
        return self._wait_until(lambda: time.monotonic() >= deadline, deadline, poll=0.1)

    def _wait_until(
        self, done: Callable[[], bool], deadline: float = math.inf, poll: float = POLL_SECONDS
    ) -> bool:
        """Wait for ``done()`` (checked every ``poll`` seconds at most); False as soon as the
        client disconnects or the server stops."""
        while not done():
            remaining = max(0.0, deadline - time.monotonic())
            if self.scripted._stopping.is_set():
                return False
            readable, _, _ = select.select([self.connection], [], [], min(remaining, poll))
            if readable:
                try:
                    peeked = self.connection.recv(1, socket.MSG_PEEK)
                except OSError:
                    peeked = b""
                if not peeked:
                    self.scripted._note_disconnect()
                    return False
                time.sleep(min(max(remaining, 0), POLL_SECONDS))  # pipelined bytes: keep waiting
        return True

    def _check_auth(self) -> bool:
        key = self.scripted.api_key
        if key and self.headers.get("Authorization") != f"Bearer {key}":
            error = {"message": "Invalid API key", "type": "invalid_request_error"}
            self._send_json(401, {"error": error})
            return False
        return True

    # -- routes

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/_requests":
            with self.scripted._cond:
                recorded = [r.to_dict() for r in self.scripted.requests]
            self._send_json(200, recorded)
        elif path == "/_state":
            self._send_json(200, self.scripted.state())
        elif path.endswith("/models"):
            if self._check_auth():
                models = [
                    {"id": model_id, "object": "model", "owned_by": "scripted"}
                    for model_id in self.scripted.listed_models
                ]
                self._send_json(200, {"object": "list", "data": models})
        elif path in ("", "/health"):
            self._send_json(200, {"status": "ok"})
        else:
            self._send_json(404, {"error": {"message": f"no route {path}"}})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        path = urlsplit(self.path).path.rstrip("/")
        try:
            body = self._read_body()
        except ValueError:
            self._send_json(400, {"error": {"message": "request body is not valid JSON"}})
            return
        if path == "/_script":
            try:
                queued = self.scripted.configure(body)
            except (KeyError, TypeError, AttributeError) as exc:
                self._send_json(400, {"error": {"message": f"bad script: {exc!r}"}})
                return
            self._send_json(200, {"ok": True, "queued": queued})
            return
        if path == "/_release":
            if not isinstance(body, dict) or not isinstance(body.get("name"), str):
                self._send_json(400, {"error": {"message": 'expected {"name": "..."}'}})
                return
            self.scripted.release(body["name"])
            self._send_json(200, {"ok": True})
            return
        if path.endswith("/embeddings"):
            if self._check_auth():
                self._answer_embeddings(body)
            return
        if not path.endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"no route {path}"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        peer = "{}:{}".format(*self.client_address[:2])
        recorded = RecordedRequest(body, path=path, headers=headers, peer=peer)
        self.scripted._record(recorded)
        if not self._check_auth():
            return
        response = self.scripted._next_response(body)
        if response is None:
            error = {"message": "script exhausted: no scripted response left", "type": "scripted"}
            self._send_json(500, {"error": error})
            return
        try:
            self._answer(body, response, recorded)
        except (BrokenPipeError, ConnectionResetError):
            self.scripted._note_disconnect()
            self.close_connection = True

    def _answer_embeddings(self, body: Any) -> None:
        scripted = self.scripted
        with scripted._cond:
            scripted.embedding_requests.append(body)
        if scripted.embedding_status:
            error = {"message": f"scripted error {scripted.embedding_status}", "type": "scripted"}
            self._send_json(scripted.embedding_status, {"error": error})
            return
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            self._send_json(400, {"error": {"message": "input must be a string or strings"}})
            return
        dims = int(body.get("dimensions") or scripted.embedding_dims)
        data = [
            {"object": "embedding", "index": n, "embedding": embeddings.embed(text, dims)}
            for n, text in enumerate(texts)
        ]
        tokens = sum(len(text.split()) for text in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        self._send_json(
            200, {"object": "list", "data": data, "model": body.get("model"), "usage": usage}
        )

    def _answer(
        self, request: dict[str, Any], response: Response, recorded: RecordedRequest
    ) -> None:
        gate = response.get("after_release")
        if gate and not self._wait_until(lambda: self.scripted._is_released(str(gate))):
            self.close_connection = True
            return
        if response.get("delay") and not self._wait(response["delay"]):
            self.close_connection = True
            return
        request_no = self.scripted._next_id()
        status = int(response.get("status") or 200)
        headers = dict(response.get("headers") or {})
        if status >= 400:
            default_error = {
                "error": {"message": f"scripted error {status}", "type": "scripted", "code": None}
            }
            self._send_json(status, response.get("error_body", default_error), headers)
            return
        model = self.scripted.model
        if not request.get("stream"):
            body = render_completion(request, response, request_no, model)
            recorded.ended = time.monotonic()  # set first: the client may read it at once
            self._send_json(200, body, headers)
            recorded.answered = time.monotonic()
            return
        # Chunked, as real providers stream: the connection stays open for the next request
        # (a close-delimited stream made every streamed call open a new connection).
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        chunks = render_chunks(request, response, request_no, model)
        stamp = response.get("stamp_chunks", self.scripted.stamp)
        pieces = 0
        for position, chunk in enumerate(chunks):
            delay = response.get("chunk_delay") if position > 1 else None
            if delay and not self._wait(delay):
                self.close_connection = True  # the client left mid-stream
                return
            if stamp:
                _stamp(chunk)
            self._write_chunk(f"data: {json.dumps(chunk)}\n\n".encode())
            if recorded.answered is None and _has_content(chunk):
                recorded.answered = time.monotonic()
            pieces += _has_content(chunk)
            pausing = _has_content(chunk) and pieces == response.get("pause_after")
            if pausing and not self._wait_until(lambda: self._resumed(response)):
                self.close_connection = True  # the client left while the stream waited
                return
            if position == 1 and response.get("hang") and not self._wait(response["hang"]):
                self.close_connection = True
                return
            if position > 0 and position == response.get("cut_after"):
                self.close_connection = True  # no terminating chunk: the body is cut
                return
        if response.get("done", True):
            self._write_chunk(b"data: [DONE]\n\n")
        if response.get("hang_after_done"):
            self.wfile.flush()
            if not self._wait(response["hang_after_done"]):
                self.close_connection = True
                return
        recorded.ended = time.monotonic()  # set first: the client may read it at once
        self.wfile.write(b"0\r\n\r\n")  # the last chunk: the response is complete
        self.wfile.flush()

    def _resumed(self, response: Response) -> bool:
        """Whether a stream paused mid-answer (``pause_after``) may go on."""
        gate = response.get("resume_on")
        return not gate or self.scripted._is_released(str(gate))

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def _has_content(chunk: dict[str, Any]) -> bool:
    return any((c.get("delta") or {}).get("content") for c in chunk.get("choices") or ())


def _stamp(chunk: dict[str, Any]) -> None:
    """Append the emission time to a content piece (in place)."""
    for choice in chunk.get("choices") or ():
        delta = choice.get("delta") or {}
        if delta.get("content"):
            delta["content"] += STAMP_FORMAT.format(time.monotonic())


# ------------------------------------------------------------------------------ main


def main(argv: Sequence[str] | None = None) -> None:
    """Serve until SIGINT/SIGTERM, printing the base URL first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, help="JSON: a list of responses or a /_script body")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--model", default="scripted-model")
    parser.add_argument(
        "--stamp", action="store_true", help="stamp streamed content pieces with their send time"
    )
    args = parser.parse_args(argv)
    server = ScriptedServer(
        host=args.host, port=args.port, api_key=args.api_key, model=args.model, stamp=args.stamp
    )
    if args.script:
        server.configure(json.loads(args.script.read_text()))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print(server.base_url, flush=True)
    try:
        stop.wait()
    finally:
        server.stop()
    sys.exit(0)


if __name__ == "__main__":
    main()
