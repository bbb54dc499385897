"""One LLM call consumed as it streams: every call of the loop and the rewrite go through here.

:func:`stream_reply` hands each delta to the caller as it arrives (merged with the ones
already waiting behind it) and returns the assembled reply. The provider's stream is read
by one pump task and raced against the cancel token, so Stop closes the upstream request
at once; a reply longer than ``max_chars`` is cut the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from engine.cancel import CancelledRun, CancelToken, run_cancellable
from engine.context import estimate_messages_tokens, estimate_tokens
from engine.llm.base import LLM, ChatDelta, ChatResponse, LLMError
from engine.messages import ChatMessage, ToolCall, Usage

__all__ = [
    "CUT",
    "StreamBroken",
    "cut_usage",
    "merge_ready",
    "stream_deltas",
    "stream_reply",
]

# ``ChatResponse.finish_reason`` of a reply cut at ``max_chars`` (as a provider's own
# output limit reports ``length``).
CUT = "cut"

OnDelta = Callable[[ChatDelta], Awaitable[None]]

# Queue items besides deltas and errors: the stream ended; the cancel token fired.
_END = object()
_CANCELLED = object()


class StreamBroken(LLMError):
    """The stream failed after some of the reply had arrived; ``partial`` holds it."""

    def __init__(self, cause: LLMError, partial: ChatResponse) -> None:
        super().__init__(str(cause), status_code=cause.status_code)
        self.cause = cause
        self.partial = partial


async def stream_reply(
    llm: LLM,
    messages: Sequence[ChatMessage],
    *,
    on_delta: OnDelta,
    cancel: CancelToken | None = None,
    max_chars: int | None = None,
    **kwargs: Any,
) -> ChatResponse:
    """Stream one call, passing text and reasoning deltas to ``on_delta``; the whole reply.

    Raises :class:`CancelledRun` when ``cancel`` fires, the provider's
    :class:`LLMError` when the call fails before any text, :class:`StreamBroken` when it
    fails after. Past ``max_chars`` characters of content the stream is closed and the
    reply's ``finish_reason`` is :data:`CUT`.
    """
    reply = _Reply(max_chars)
    try:
        # aclosing: leaving early (a cut) closes the upstream request now, not at GC.
        async with contextlib.aclosing(
            stream_deltas(llm, messages, cancel=cancel, **kwargs)
        ) as deltas:
            async for delta in deltas:
                shown = reply.add(delta)
                if shown is not None:
                    await on_delta(shown)
                if reply.finish_reason == CUT:
                    break
    except LLMError as exc:
        if reply.content or reply.reasoning:
            raise StreamBroken(exc, reply.response()) from exc
        raise
    if reply.finish_reason == CUT and not reply.usage.total_tokens:
        reply.usage = cut_usage(messages, reply.content + reply.reasoning)
    return reply.response()


def cut_usage(messages: Sequence[ChatMessage], text: str) -> Usage:
    """The estimated usage of a call closed early: the provider's usage chunk comes last,
    so a reply cut at its length limit never receives it."""
    prompt, completion = estimate_messages_tokens(messages), estimate_tokens(text)
    return Usage(prompt, completion, prompt + completion, estimated=True)


async def stream_deltas(
    llm: LLM, messages: Sequence[ChatMessage], *, cancel: CancelToken | None, **kwargs: Any
) -> AsyncIterator[ChatDelta]:
    """The deltas of one call, raced against ``cancel``; a model that cannot stream is
    called with ``chat()`` and its reply comes as two deltas (text, then the rest)."""
    if cancel is not None:
        cancel.raise_if_cancelled()
    if not llm.abilities.get("streaming", True):
        whole = await run_cancellable(llm.chat(messages, **kwargs), cancel)
        if whole.content or whole.reasoning_content:
            yield ChatDelta(content=whole.content, reasoning_content=whole.reasoning_content or "")
        yield ChatDelta(
            tool_calls=whole.tool_calls or None,
            usage=whole.usage,
            finish_reason=whole.finish_reason or "stop",
        )
        return
    async with contextlib.aclosing(_deltas(llm.stream_chat(messages, **kwargs), cancel)) as deltas:
        async for delta in deltas:
            yield delta


class _Reply:
    """The reply assembled from its deltas."""

    def __init__(self, max_chars: int | None = None) -> None:
        self.budget = max_chars
        self.parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.usage = Usage()
        self.finish_reason: str | None = None

    @property
    def content(self) -> str:
        return "".join(self.parts)

    @property
    def reasoning(self) -> str:
        return "".join(self.reasoning_parts)

    def add(self, delta: ChatDelta) -> ChatDelta | None:
        """Take in ``delta``; the part of it to show (None: nothing to show)."""
        if delta.tool_calls:
            self.tool_calls.extend(delta.tool_calls)
        if delta.usage is not None:
            self.usage = self.usage + delta.usage
        if delta.finish_reason and self.finish_reason != CUT:
            self.finish_reason = delta.finish_reason
        content = delta.content
        if content and self.budget is not None:
            if len(content) >= self.budget:
                content, self.finish_reason = content[: self.budget], CUT
            self.budget -= len(content)
        if content:
            self.parts.append(content)
        if delta.reasoning_content:
            self.reasoning_parts.append(delta.reasoning_content)
        if not (content or delta.reasoning_content):
            return None
        if content is delta.content:
            return delta
        return ChatDelta(content=content, reasoning_content=delta.reasoning_content)

    def response(self) -> ChatResponse:
        return ChatResponse(
            content=self.content,
            tool_calls=list(self.tool_calls),
            reasoning_content=self.reasoning or None,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )


async def _deltas(
    stream: AsyncIterator[ChatDelta], cancel: CancelToken | None
) -> AsyncIterator[ChatDelta]:
    """The deltas of ``stream``, raced against the cancel token.

    One pump task reads the provider's stream (an HTTP stream is never advanced from
    several tasks) and cancelling it closes the upstream request. Deltas read from the
    socket together come out merged (:func:`merge_ready`).
    """
    queue: asyncio.Queue[Any] = asyncio.Queue()
    pump = asyncio.ensure_future(_pump(stream, queue))
    # One watcher per stream (not a race per chunk: two tasks for every token).
    watcher = _put_when_cancelled(cancel, queue)
    held: Any = None  # an item read while merging, handled next
    try:
        while True:
            if held is not None:
                item, held = held, None
            else:
                item = await queue.get()
            if item is _CANCELLED or (cancel is not None and cancel.cancelled):
                raise CancelledRun("cancelled")
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            item, held = merge_ready(item, queue)
            yield item
    finally:
        if watcher is not None:
            watcher.cancel()
        if not pump.done():
            pump.cancel()
            # wait(), not ``await pump``: if this task is cancelled too (a plan step
            # stopped by its executor), awaiting would cancel the pump a second time and
            # cut short its closing of the upstream request.
            await asyncio.wait({pump})


def merge_ready(delta: ChatDelta, queue: asyncio.Queue[Any]) -> tuple[ChatDelta, Any]:
    """``delta`` plus the plain text deltas already waiting behind it, as one delta.

    Chunks read from the socket together (a loaded process reads a backlog) then cost one
    event downstream instead of one each; text order is kept. Returns the merged delta and
    the first queued item that is not plain text (or None), which the caller handles next.
    """
    if not _plain_text(delta):
        return delta, None
    parts, held = [delta.content], None
    while not queue.empty():
        item = queue.get_nowait()
        if not _plain_text(item):
            held = item
            break
        parts.append(item.content)
    return (delta if len(parts) == 1 else ChatDelta(content="".join(parts))), held


def _plain_text(item: Any) -> bool:
    return (
        isinstance(item, ChatDelta)
        and bool(item.content)
        and not item.reasoning_content
        and not item.tool_calls
        and item.usage is None
        and not item.finish_reason
    )


def _put_when_cancelled(
    token: CancelToken | None, queue: asyncio.Queue[Any]
) -> asyncio.Task | None:
    """A task that wakes the queue's reader with ``_CANCELLED`` once ``token`` fires."""
    if token is None:
        return None

    async def watch() -> None:
        await token.wait()
        queue.put_nowait(_CANCELLED)

    return asyncio.ensure_future(watch())


async def _pump(stream: AsyncIterator[ChatDelta], queue: asyncio.Queue[Any]) -> None:
    try:
        async for delta in stream:
            queue.put_nowait(delta)
    except Exception as exc:
        queue.put_nowait(exc)
        return
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
    queue.put_nowait(_END)
