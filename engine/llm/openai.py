"""OpenAI-compatible chat-completions client over one ``httpx.AsyncClient``.

Most servers speak this wire format, so one client covers them; pass the base URL that
ends in ``/v1`` (requests go to ``{base_url}/chat/completions``):

- OpenAI: ``https://api.openai.com/v1``
- DeepSeek: ``https://api.deepseek.com/v1`` (``reasoning_content`` on R1 models)
- vLLM: ``http://host:8000/v1``
- llama.cpp server: ``http://host:8080/v1`` (repeats tool-call ids/names in every chunk)
- Ollama: ``http://localhost:11434/v1`` (any non-empty API key)

Behaviour worth knowing:

- Tool-call arguments are JSON-decoded. Invalid JSON is repaired with ``json_repair``
  (models often emit trailing commas or single quotes); when even that does not give an
  object, the raw text is kept as ``{"__raw__": "<text>"}`` so the agent can show the model
  its mistake (schema validation then fails with a clear error).
- When the server reports no usage, it is estimated (ASCII chars / 4, others / 1.5, plus 4
  per message) and marked ``Usage.estimated``.
- Errors are mapped onto the tree of :mod:`engine.llm.base` by :func:`map_http_error`;
  retryable ones (429, 5xx, connect errors, timeouts) are retried with exponential backoff
  and jitter, honouring ``Retry-After``. A stream is retried only before anything was
  yielded.
- Cancelling the consuming task (or closing the generator) closes the HTTP response, so
  the upstream server stops generating.
- The API key never appears in a repr, a log line or an exception message.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import logging
import random
import re
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import json_repair

from engine.llm.base import (
    AuthenticationError,
    BadRequestError,
    ChatDelta,
    ChatResponse,
    ContextOverflowError,
    LLMError,
    LLMTimeoutError,
    QuotaExceededError,
    RateLimitError,
    StreamEndedEarly,
    UnavailableError,
    ascii_chars,
    default_abilities,
)
from engine.llm.transport import AsyncioTransport
from engine.messages import ChatMessage, ToolCall, Usage

__all__ = [
    "OpenAICompatibleLLM",
    "decode_arguments",
    "estimate_usage",
    "map_http_error",
    "parse_retry_after",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A 429 that no wait cures: the account's quota or credit is spent (OpenAI's code).
QUOTA_MARKERS = ("insufficient_quota", "exceeded your current quota")
CONTEXT_OVERFLOW_MARKERS = (
    "context_length_exceeded",  # OpenAI error code
    "maximum context length",  # OpenAI / vLLM message
    "context length",
    "exceeds the context",
    "exceed_context_size",  # llama.cpp error type
    "context size",  # llama.cpp "exceeds the available context size"
    "context window",
    "n_ctx",  # older llama.cpp
)
MAX_ERROR_MESSAGE_CHARS = 500


# --------------------------------------------------------------------------- helpers


def _estimate_text_tokens(text: str) -> int:
    """ASCII characters / 4, other characters / 1.5: a non-empty text is at least 1."""
    if not text:
        return 0
    ascii_count = ascii_chars(text)
    other = len(text) - ascii_count
    return max(1, round(ascii_count / 4 + other / 1.5))


def estimate_usage(messages: Sequence[Mapping[str, Any]], completion: str) -> Usage:
    """A rough token count for servers that report none (``estimated=True``)."""
    prompt = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            text = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        else:
            text = content or ""
        prompt += 4 + _estimate_text_tokens(text)
        if message.get("tool_calls"):
            prompt += _estimate_text_tokens(json.dumps(message["tool_calls"]))
    done = _estimate_text_tokens(completion)
    return Usage(prompt, done, prompt + done, estimated=True)


def decode_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON, else repaired JSON, else ``{"__raw__": raw}``."""
    if isinstance(raw, dict):
        return raw
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}
    text = raw if isinstance(raw, str) else str(raw)
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = json_repair.loads(text)
        except Exception:  # noqa: BLE001 - any repair failure means "keep it raw"
            value = None
    return value if isinstance(value, dict) else {"__raw__": text}


def parse_retry_after(headers: Mapping[str, str] | httpx.Headers | None) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or HTTP-date) or ``retry-after-ms``."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _error_message(body: Any) -> tuple[str, str]:
    """(message, code) from the error body shapes servers use."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message") or json.dumps(error)
            code = " ".join(str(error.get(k) or "") for k in ("code", "type"))
            return str(message), code
        if isinstance(error, str) and error:
            return error, ""
        if "detail" in body:
            detail = body["detail"]
            return (detail if isinstance(detail, str) else json.dumps(detail)), ""
        if isinstance(body.get("message"), str):
            return body["message"], ""
        return json.dumps(body), ""
    return str(body or ""), ""


def map_http_error(
    status_code: int,
    body: str | bytes | dict[str, Any] | None,
    headers: Mapping[str, str] | httpx.Headers | None = None,
    *,
    secret: str | None = None,
) -> LLMError:
    """The one place an HTTP error status becomes an :class:`LLMError`.

    Context-overflow messages are recognised whatever the status (older llama.cpp answers
    500), so the agent compacts instead of retrying a request that can never fit.
    """
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        with contextlib.suppress(ValueError):
            body = json.loads(body) if body.strip() else body
    message, code = _error_message(body)
    message = _redact(message, secret)[:MAX_ERROR_MESSAGE_CHARS] or "(no error message)"
    text = f"HTTP {status_code}: {message}"
    haystack = f"{message} {code}".lower()
    if status_code in (401, 403):
        return AuthenticationError(text, status_code=status_code)
    if status_code == 429 and any(marker in haystack for marker in QUOTA_MARKERS):
        return QuotaExceededError(text, status_code=429)
    if status_code == 429:
        return RateLimitError(text, status_code=429, retry_after=parse_retry_after(headers))
    if status_code >= 400 and any(marker in haystack for marker in CONTEXT_OVERFLOW_MARKERS):
        return ContextOverflowError(text, status_code=status_code)
    if status_code == 408:
        return LLMTimeoutError(text, status_code=status_code)
    if status_code >= 500:
        return UnavailableError(text, status_code=status_code)
    if 400 <= status_code < 500:
        return BadRequestError(text, status_code=status_code)
    return LLMError(text, status_code=status_code)


def _map_transport_error(exc: httpx.HTTPError, url: str) -> LLMError:
    if isinstance(exc, httpx.TimeoutException):
        return LLMTimeoutError(f"request to {url} timed out ({type(exc).__name__})")
    if isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.UnsupportedProtocol):
        return UnavailableError(f"cannot reach {url}: {type(exc).__name__}: {exc}")
    return LLMError(f"request to {url} failed: {type(exc).__name__}: {exc}")


def _redact(text: str, secret: str | None) -> str:
    if secret and len(secret) >= 4:
        return text.replace(secret, "[redacted]")
    return text


def _text_of(content: Any) -> str:
    """The text of a message's or a delta's ``content``: a string, or the text of its
    content parts. Anything else (a number, an object) is not text and is dropped, never
    shown to the user as its Python or JSON form."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    if content is not None:
        logger.warning("ignored a non-text content value of type %s", type(content).__name__)
    return ""


def _reported_usage(reported: Any) -> Usage | None:
    """The server's usage, or None when absent or all zero (then it gets estimated)."""
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    if isinstance(reported, dict) and any(reported.get(k) for k in keys):
        return Usage.from_dict(reported)
    return None


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


# ----------------------------------------------------------------------------- client


class OpenAICompatibleLLM:
    """An :class:`~engine.llm.base.LLM` speaking ``/chat/completions``.

    ``transport`` is how its requests go out, e.g. a :class:`ConnectionPool` shared by
    the runs of one event loop; without one the client opens connections of its own and
    closes them in :meth:`aclose`.
    """

    backoff_base = 0.5
    backoff_cap = 20.0
    retry_after_cap = 60.0

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        abilities: dict[str, Any] | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 3,
        extra_headers: Mapping[str, str] | None = None,
        default_params: Mapping[str, Any] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.abilities = default_abilities(abilities)
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.default_params = dict(default_params or {})
        self._api_key = api_key or None
        self._extra_headers = dict(extra_headers or {})
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleLLM(base_url={self.base_url!r}, model={self.model!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    # -- client lifecycle

    def _get_client(self) -> httpx.AsyncClient:
        """The shared client, recreated if used from another event loop (e.g. Celery)."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client.is_closed or self._client_loop is not loop:
            headers = {"Content-Type": "application/json", **self._extra_headers}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout),
                headers=headers,
                transport=self._transport or new_transport(),
                verify=_ssl_context(),
            )
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        loop, self._client_loop = self._client_loop, None
        if client is not None and loop is asyncio.get_running_loop():
            await client.aclose()

    async def __aenter__(self) -> OpenAICompatibleLLM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- requests

    def _payload(self, messages: Sequence[ChatMessage], opts: Mapping[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [m.to_openai() for m in messages],
        }
        body.update(self.default_params)
        body.update({k: v for k, v in opts.items() if v is not None})
        return body

    def _retry_delay(self, attempt: int, error: LLMError) -> float:
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            return min(float(retry_after), self.retry_after_cap)
        ceiling = min(self.backoff_cap, self.backoff_base * 2**attempt)
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _back_off(self, error: LLMError, attempt: int, what: str) -> int:
        """Wait before retry number ``attempt + 1`` and return that number; re-raise
        ``error`` when it is not retryable or the retries are spent."""
        if not error.retryable or attempt >= self.max_retries:
            raise error
        delay = self._retry_delay(attempt, error)
        logger.warning(
            "LLM %s%s: %s; retry %d/%d in %.2fs",
            self.model, what, error.message, attempt + 1, self.max_retries, delay,
        )  # fmt: skip
        await asyncio.sleep(delay)
        return attempt + 1

    async def _retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        attempt = 0
        while True:
            try:
                return await call()
            except LLMError as error:
                attempt = await self._back_off(error, attempt, "")

    def _error(self, status: int, body: Any, headers: Any = None) -> LLMError:
        """The error of a failed request, saying which request it was (for staff)."""
        error = map_http_error(status, body, headers, secret=self._api_key)
        return error.about(f"POST {self.url}, model {self.model}")

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        response_format: dict[str, Any] | None = None,
        **opts: Any,
    ) -> ChatResponse:
        """One non-streamed completion, retried on retryable errors."""
        extra = {"tools": tools, "tool_choice": tool_choice, "response_format": response_format}
        payload = self._payload(messages, {**opts, **extra})
        payload.pop("stream", None)
        return await self._retrying(lambda: self._chat_once(payload))

    async def _chat_once(self, payload: dict[str, Any]) -> ChatResponse:
        try:
            response = await self._get_client().post(self.url, json=payload)
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, self.url) from None
        if response.status_code >= 400:
            raise self._error(response.status_code, response.content, response.headers)
        try:
            data = response.json()
        except ValueError:
            raise LLMError(
                f"{self.url} answered with non-JSON content (is base_url right?)",
                status_code=response.status_code,
            ) from None
        return self._parse_response(data, payload["messages"])

    def _parse_response(self, data: Any, sent: list[dict[str, Any]]) -> ChatResponse:
        if not isinstance(data, dict):
            raise LLMError(f"unexpected response from {self.url}: {type(data).__name__}")
        if data.get("error") and not data.get("choices"):  # errors inside a 200 body
            raise self._error(_status_of(data), data)
        choices = data.get("choices") or [{}]
        choice = choices[0] or {}
        message = choice.get("message") or {}
        content = _text_of(message.get("content"))
        reasoning = _text_of(message.get("reasoning_content") or message.get("reasoning")) or None
        calls = [
            ToolCall(
                id=raw.get("id") or _new_call_id(),
                name=(raw.get("function") or {}).get("name") or "",
                arguments=decode_arguments((raw.get("function") or {}).get("arguments")),
            )
            for raw in message.get("tool_calls") or []
        ]
        usage = self._usage(data.get("usage"), sent, content, reasoning, calls)
        return ChatResponse(
            content=content,
            tool_calls=calls,
            reasoning_content=reasoning,
            usage=usage,
            finish_reason=choice.get("finish_reason"),
        )

    @staticmethod
    def _usage(
        reported: Any,
        sent: list[dict[str, Any]],
        content: str,
        reasoning: str | None,
        calls: list[ToolCall],
    ) -> Usage:
        usage = _reported_usage(reported)
        if usage is not None:
            return usage
        completion = content + (reasoning or "")
        completion += "".join(c.name + json.dumps(c.arguments) for c in calls)
        return estimate_usage(sent, completion)

    # -- streaming

    async def stream_chat(
        self, messages: Sequence[ChatMessage], **opts: Any
    ) -> AsyncIterator[ChatDelta]:
        """Stream deltas; the last one carries assembled tool calls, usage and finish reason.

        Retried like :meth:`chat`, but only while nothing has been yielded.
        """
        payload = self._payload(messages, opts)
        payload["stream"] = True
        payload.setdefault("stream_options", {"include_usage": True})
        attempt = 0
        while True:
            yielded = False
            try:
                # aclosing: closing this generator closes the inner one (and its response)
                # at once, not whenever the garbage collector gets to it.
                async with contextlib.aclosing(self._stream_once(payload)) as deltas:
                    async for delta in deltas:
                        yielded = True
                        yield delta
                return
            except LLMError as error:
                if yielded:  # the caller has part of the answer: no silent restart
                    raise
                attempt = await self._back_off(error, attempt, " stream")

    async def _stream_once(self, payload: dict[str, Any]) -> AsyncIterator[ChatDelta]:
        state = _StreamState()
        try:
            async with self._get_client().stream("POST", self.url, json=payload) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise self._error(response.status_code, response.content, response.headers)
                if response.headers.get("content-type", "").startswith("application/json"):
                    # A server that ignored stream=true: replay the whole reply as one delta.
                    await response.aread()
                    try:
                        data = response.json()
                    except ValueError:
                        raise LLMError(f"{self.url} streamed invalid JSON") from None
                    whole = self._parse_response(data, payload["messages"])
                    yield ChatDelta(
                        content=whole.content, reasoning_content=whole.reasoning_content or ""
                    )
                    yield ChatDelta(
                        tool_calls=whole.tool_calls or None,
                        usage=whole.usage,
                        finish_reason=whole.finish_reason,
                    )
                    return
                events = _iter_sse(response)
                done = False
                async for field, data in events:
                    if data.strip() == "[DONE]":
                        done = True
                        await _read_to_end(events)
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        logger.debug("skipping non-JSON SSE data from %s", self.url)
                        continue
                    if field == "error" and not (isinstance(chunk, dict) and "error" in chunk):
                        chunk = {"error": chunk}  # llama.cpp: `error: {"code", "message"}`
                    if isinstance(chunk, dict) and chunk.get("error") and not chunk.get("choices"):
                        raise self._error(_status_of(chunk), chunk)
                    for delta in state.feed(chunk):
                        yield delta
                if not done and state.finish_reason is None:
                    # Either marker ends a reply (servers differ in which they send); a
                    # body that ends with neither was cut short, however cleanly.
                    raise StreamEndedEarly(
                        f"the stream from {self.url} ended without a finish_reason or [DONE]"
                    )
        except httpx.HTTPError as exc:
            raise _map_transport_error(exc, self.url) from None
        calls = state.tool_calls()
        usage = state.usage
        if usage is None:
            completion = state.text + "".join(c.name + json.dumps(c.arguments) for c in calls)
            usage = estimate_usage(payload["messages"], completion)
        yield ChatDelta(tool_calls=calls or None, usage=usage, finish_reason=state.finish_reason)


# After ``[DONE]`` the body's end follows at once from a well-behaved server; a server that
# keeps the response open must not hold the answer back longer than this.
DRAIN_AFTER_DONE_SECONDS = 0.25


async def _read_to_end(events: AsyncIterator[tuple[str, str]]) -> None:
    """Read what follows ``[DONE]`` up to the body's end, so the connection goes back to the
    pool: a response closed unread costs the next call a new TCP (and TLS) connection."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError):
        async with asyncio.timeout(DRAIN_AFTER_DONE_SECONDS):
            async for _event in events:
                pass


def _status_of(chunk: Any) -> int:
    error = chunk.get("error") if isinstance(chunk, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and 400 <= code < 600 else 502


def preload() -> None:
    """Build now what this module's first request would build, e.g. while a server starts:
    the TLS context (loading the CA bundle takes long enough to hold up a user's first run).
    """
    _ssl_context()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one loads the CA bundle, and a client is built
    per run (in a Celery worker, per event loop too)."""
    return httpx.create_ssl_context()


# Every streaming run holds a connection for its whole answer: no cap on open connections
# (a worker's --concurrency bounds them); keep some idle ones for the next runs.
POOL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=64)


def new_transport() -> AsyncioTransport:
    return AsyncioTransport(ssl_context=_ssl_context(), limits=POOL_LIMITS)


class ConnectionPool:
    """One event loop's connections to LLM providers, shared by every client on that loop.

    A client is built per run (a run builds its LLM); a pool per client would open a new
    TCP and TLS connection to the provider for every run. Clients send through
    :attr:`transport` without closing it; the pool's owner (the process's runtime)
    closes it.
    """

    def __init__(self) -> None:
        self.transport = new_transport()

    def lend(self) -> httpx.AsyncBaseTransport:
        """The pool's transport for one client: closing the client leaves it open."""
        return _Lent(self.transport)

    async def aclose(self) -> None:
        await self.transport.aclose()


class _Lent(httpx.AsyncBaseTransport):
    def __init__(self, shared: httpx.AsyncBaseTransport) -> None:
        self._shared = shared

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self._shared.handle_async_request(request)

    async def aclose(self) -> None:
        """The pool outlives the client."""


_LINE_END = re.compile(rb"\r\n|\r|\n")


class _SSEEvents:
    """Assembles SSE events line by line: ``data``/``error`` lines until a blank line."""

    def __init__(self) -> None:
        self.field = "data"
        self.lines: list[str] = []

    def line(self, raw: bytes) -> tuple[str, str] | None:
        """Take one line (without its end); returns the event a blank line completes."""
        if not raw:
            event = (self.field, "\n".join(self.lines)) if self.lines else None
            self.field, self.lines = "data", []
            return event
        name, _, value = raw.decode("utf-8", "replace").partition(":")
        if name in ("data", "error"):  # comments (":...") and other fields are skipped
            self.field = name
            self.lines.append(value[1:] if value.startswith(" ") else value)
        return None


async def _iter_sse(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """(field, data) per SSE event; ``field`` is "data", or "error" (llama.cpp).

    Splits the (decoded) bytes into lines itself: ``aiter_lines`` stacks a text decoder
    and a line decoder generator on every chunk, costly next to the little work a token
    needs. Lines end at CRLF, CR or LF; a CR at a chunk's end waits for the next chunk (it
    may be half of a CRLF). Splitting at ASCII line ends never cuts a UTF-8 character.
    """
    events = _SSEEvents()
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        end = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
        *complete, rest = _LINE_END.split(buffer[:end])
        buffer = rest + buffer[end:]
        for raw in complete:
            if (event := events.line(raw)) is not None:
                yield event
    for raw in [*_LINE_END.split(buffer), b""]:  # the stream's end ends the last event
        if (event := events.line(raw)) is not None:
            yield event


class _StreamState:
    """Accumulates one stream: text seen, tool-call fragments by index, usage, finish."""

    def __init__(self) -> None:
        self.text = ""
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self._calls: dict[int, dict[str, Any]] = {}

    def feed(self, chunk: Any) -> list[ChatDelta]:
        if not isinstance(chunk, dict):
            return []
        self.usage = _reported_usage(chunk.get("usage")) or self.usage
        deltas: list[ChatDelta] = []
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or choice.get("message") or {}
            content = _text_of(delta.get("content"))
            reasoning = _text_of(delta.get("reasoning_content") or delta.get("reasoning"))
            for position, fragment in enumerate(delta.get("tool_calls") or []):
                self._add_fragment(position, fragment)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            if content or reasoning:
                self.text += content + reasoning
                deltas.append(ChatDelta(content=content, reasoning_content=reasoning))
        return deltas

    def _add_fragment(self, position: int, fragment: dict[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            known = [i for i, c in self._calls.items() if fragment.get("id") == c["id"]]
            index = known[0] if known else len(self._calls) + position
        call = self._calls.setdefault(index, {"id": None, "name": None, "arguments": ""})
        if fragment.get("id"):
            call["id"] = fragment["id"]  # set, not appended: some servers repeat it
        function = fragment.get("function") or {}
        if function.get("name"):
            call["name"] = function["name"]
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            call["arguments"] += arguments
        elif isinstance(arguments, dict):
            call["arguments"] = json.dumps(arguments)

    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(
                id=call["id"] or _new_call_id(),
                name=call["name"] or "",
                arguments=decode_arguments(call["arguments"]),
            )
            for _, call in sorted(self._calls.items())
        ]
