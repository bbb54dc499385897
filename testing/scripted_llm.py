"""An in-process LLM that replays a script: the test double of the
:class:`~engine.llm.base.LLM` protocol.

Tests (and benchmarks) hand it the replies they want, in order, and inspect ``.calls``
afterwards to assert what the engine sent. Script items:

- a :class:`~engine.llm.base.ChatResponse`, returned as is;
- a ``str``: the reply's content;
- a ``dict`` shorthand: ``{"content", "tool_calls": [{"name", "arguments", "id"?}],
  "reasoning_content", "usage", "finish_reason", "stream_error"}`` (``stream_error`` is
  raised by ``stream_chat`` after the content chunks, to test failures mid-stream);
- an ``Exception`` instance: raised;
- a callable ``(messages, kwargs) -> item`` (may return an awaitable): computed at call
  time, so a test can react to what the engine sent or block until cancelled.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import re
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

from engine.errors import ScriptExhaustedError
from engine.llm.base import ChatDelta, ChatResponse, default_abilities
from engine.messages import ChatMessage, ToolCall, Usage

__all__ = ["DEFAULT_USAGE", "ScriptExhaustedError", "ScriptedLLM", "to_response"]

DEFAULT_USAGE = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
_CHUNK_RE = re.compile(r"\s*\S+\s*|\s+")


def to_response(item: Any, *, call_index: int = 0, usage: Usage = DEFAULT_USAGE) -> ChatResponse:
    """Turn a plain script item (response, str or dict shorthand) into a ChatResponse."""
    if isinstance(item, ChatResponse):
        return item
    if isinstance(item, str):
        return ChatResponse(content=item, usage=usage, finish_reason="stop")
    if isinstance(item, dict):
        return _from_dict(item, call_index, usage)
    raise TypeError(f"unsupported ScriptedLLM item: {item!r}")


def _from_dict(item: dict[str, Any], call_index: int, usage: Usage) -> ChatResponse:
    calls = [
        ToolCall(
            id=str(raw.get("id") or f"call_{call_index}_{n}"),
            name=raw["name"],
            arguments=dict(raw.get("arguments") or {}),
        )
        for n, raw in enumerate(item.get("tool_calls") or [])
    ]
    raw_usage = item.get("usage", usage)
    if isinstance(raw_usage, dict):
        raw_usage = Usage.from_dict(raw_usage)
    return ChatResponse(
        content=item.get("content") or "",
        tool_calls=calls,
        reasoning_content=item.get("reasoning_content"),
        usage=raw_usage,
        finish_reason=item.get("finish_reason") or ("tool_calls" if calls else "stop"),
    )


def split_chunks(text: str) -> list[str]:
    """Word-sized pieces whose concatenation is exactly ``text``."""
    return _CHUNK_RE.findall(text)


class ScriptedLLM:
    """Replays ``responses`` in order and records every request in ``.calls``.

    Each record is a dict: ``method`` ("chat" or "stream_chat"), ``messages`` (copies),
    ``tools``, ``tool_choice``, ``response_format``, ``stream``, ``opts``; streamed calls
    also get ``closed=True`` once the stream ends or is closed early. ``record=False``
    skips the bookkeeping (benchmarks).
    """

    def __init__(
        self,
        responses: Iterable[Any] = (),
        *,
        abilities: dict[str, Any] | None = None,
        stream_chunk_delay: float = 0.0,
        default_usage: Usage = DEFAULT_USAGE,
        record: bool = True,
    ) -> None:
        self.script: deque[Any] = deque(responses)
        self.abilities = default_abilities(abilities)
        self.stream_chunk_delay = stream_chunk_delay
        self.default_usage = default_usage
        self.record = record
        self.calls: list[dict[str, Any]] = []
        self.call_count = 0

    def add(self, *items: Any) -> None:
        """Append more replies to the script."""
        self.script.extend(items)

    @property
    def remaining(self) -> int:
        return len(self.script)

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        response_format: dict[str, Any] | None = None,
        **opts: Any,
    ) -> ChatResponse:
        kwargs = {
            "tools": tools,
            "tool_choice": tool_choice,
            "response_format": response_format,
            **opts,
        }
        self._record("chat", messages, kwargs, stream=False)
        item = await self._resolve(self._next(messages), messages, kwargs)
        return self._response(item)

    def stream_chat(self, messages: Sequence[ChatMessage], **opts: Any) -> AsyncIterator[ChatDelta]:
        record = self._record("stream_chat", messages, opts, stream=True)
        item = self._next(messages)
        return self._stream(item, messages, opts, record)

    async def _stream(
        self,
        item: Any,
        messages: Sequence[ChatMessage],
        opts: dict[str, Any],
        record: dict[str, Any],
    ) -> AsyncIterator[ChatDelta]:
        try:
            item = await self._resolve(item, messages, opts)
            stream_error = item.get("stream_error") if isinstance(item, dict) else None
            response = self._response(item)
            if response.reasoning_content:
                yield ChatDelta(reasoning_content=response.reasoning_content)
            for chunk in split_chunks(response.content):
                await asyncio.sleep(self.stream_chunk_delay)
                yield ChatDelta(content=chunk)
            if stream_error is not None:
                raise stream_error
            yield ChatDelta(
                tool_calls=response.tool_calls or None,
                usage=response.usage,
                finish_reason=response.finish_reason or "stop",
            )
        finally:
            record["closed"] = True

    def _record(
        self, method: str, messages: Sequence[ChatMessage], kwargs: dict[str, Any], *, stream: bool
    ) -> dict[str, Any]:
        self.call_count += 1
        entry: dict[str, Any] = {"method": method, "stream": stream}
        if self.record:
            entry.update(
                messages=[copy.copy(m) for m in messages],
                tools=kwargs.get("tools"),
                tool_choice=kwargs.get("tool_choice"),
                response_format=kwargs.get("response_format"),
                opts={
                    k: v
                    for k, v in kwargs.items()
                    if k not in {"tools", "tool_choice", "response_format"}
                },
            )
            self.calls.append(entry)
        return entry

    def _next(self, messages: Sequence[ChatMessage]) -> Any:
        if not self.script:
            last = messages[-1].text()[:200] if messages else ""
            raise ScriptExhaustedError(
                f"ScriptedLLM script exhausted: request #{self.call_count} has no scripted "
                f"reply (last message: {last!r})"
            )
        return self.script.popleft()

    @staticmethod
    async def _resolve(item: Any, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> Any:
        """Run a callable item and raise an exception item; return the plain item."""
        if callable(item) and not isinstance(item, BaseException):
            item = item(list(messages), kwargs)
            if inspect.isawaitable(item):
                item = await item
        if isinstance(item, BaseException):
            raise item
        return item

    def _response(self, item: Any) -> ChatResponse:
        return to_response(item, call_index=self.call_count, usage=self.default_usage)
