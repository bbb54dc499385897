"""The answer phase: stream the run's answer to the user, then end the run with ``Done``.

A succeeded run gets a separate synthesis call (the question and the loop's trace); a
paused or failed run streams its explanation verbatim. The provider's stream is consumed
by one pump task and raced against the cancel token, so Stop closes the upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from engine import prompts
from engine.cancel import CancelledRun, CancelToken, run_cancellable
from engine.events import AgentEvent, AnswerDelta, AnswerDone, AnswerStart, Done
from engine.llm.base import LLM, ChatDelta, LLMError
from engine.messages import ChatMessage

if TYPE_CHECKING:
    from engine.agent import AgentResult

__all__ = ["CANCELLED", "INCOMPLETE", "SUCCEEDED", "finish", "merge_ready", "stream_answer"]

logger = logging.getLogger(__name__)

# The values of ``AgentResult.status`` this phase reads and sets (engine.agent, which
# imports this module, defines the others).
SUCCEEDED = "succeeded"
CANCELLED = "cancelled"
# The answer was cut short: its stream broke off midway, or it reached its length limit.
INCOMPLETE = "incomplete"

# An answer longer than this many tokens (estimated as characters / 4) is cut: a model
# that never stops would otherwise stream until Stop.
DEFAULT_MAX_ANSWER_TOKENS = 4096
CHARS_PER_TOKEN = 4

Emit = Callable[[AgentEvent], Awaitable[None]]
T = TypeVar("T")

# Queue items besides deltas and errors: the stream ended; the cancel token fired.
_END = object()
_CANCELLED = object()


async def stream_answer(
    llm: LLM,
    result: AgentResult,
    query: str,
    *,
    cancel: CancelToken | None,
    emit: Emit,
    max_tokens: int | None = None,
) -> AsyncIterator[str]:
    """Stream the final answer, then emit ``AnswerDone`` and ``Done``.

    A succeeded run gets a separate synthesis call (question + trace); a paused or
    failed run streams its explanation verbatim. If the stream fails before its
    first chunk, ``result.answer`` is streamed instead; if it fails midway, or the answer
    passes ``max_tokens`` (default :data:`DEFAULT_MAX_ANSWER_TOKENS`), what streamed is
    the answer and ``result.status`` becomes ``incomplete`` with the reason in
    ``result.error``. On cancellation it stops, sets ``result.status`` to ``cancelled``
    and emits neither ``AnswerDone`` nor ``Done``. The stream's usage and time are added
    to ``result``.
    """
    if result.status == CANCELLED or (cancel is not None and cancel.cancelled):
        result.status = CANCELLED
        return
    started = time.perf_counter()
    await emit(AnswerStart())
    parts: list[str] = []
    try:
        if result.status == SUCCEEDED:
            limit = max_tokens or DEFAULT_MAX_ANSWER_TOKENS
            source = _capped(_synthesise(llm, result, query, cancel), result, limit)
        else:
            source = _single(result.answer)
        async for chunk in source:
            parts.append(chunk)
            await emit(AnswerDelta(chunk))
            yield chunk
    except CancelledRun:
        result.status = CANCELLED
        result.elapsed += time.perf_counter() - started
        logger.info("answer stream cancelled after %d chunk(s)", len(parts))
        return
    result.elapsed += time.perf_counter() - started
    await emit(AnswerDone())
    await finish(result, "".join(parts), emit=emit)


async def finish(result: AgentResult, answer: str | None = None, *, emit: Emit) -> None:
    """Emit the run's one ``Done`` event (``stream_answer`` calls this at its end)."""
    text = result.answer if answer is None else answer
    if result.status == INCOMPLETE:
        status, reason = INCOMPLETE, result.error or "The answer is incomplete."
    else:
        status, reason = SUCCEEDED, ""
    usage = result.usage.to_dict()
    await emit(Done(text, result.iterations, usage, result.elapsed, status, reason))


async def _capped(
    chunks: AsyncIterator[str], result: AgentResult, limit: int
) -> AsyncIterator[str]:
    """``chunks`` up to about ``limit`` tokens; past it the stream is closed (which closes
    the upstream request) and the answer marked incomplete."""
    budget = limit * CHARS_PER_TOKEN
    try:
        async for chunk in chunks:
            if len(chunk) >= budget:
                yield chunk[:budget]
                result.status = INCOMPLETE
                result.error = f"The answer reached its length limit ({limit} tokens) and was cut."
                return
            budget -= len(chunk)
            yield chunk
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]


async def _synthesise(
    llm: LLM, result: AgentResult, query: str, cancel: CancelToken | None
) -> AsyncIterator[str]:
    """Chunks of the synthesised answer; the loop's answer when the stream fails early."""
    trace = [(s.tool_name, s.tool_args, s.observation) for s in result.steps]
    messages = [
        ChatMessage("system", prompts.SYNTHESIS_SYSTEM_PROMPT),
        ChatMessage("user", prompts.synthesis_user_prompt(query, trace, result.answer)),
    ]
    yielded = False
    try:
        async for delta in _answer_deltas(llm, messages, cancel):
            if delta.usage is not None:
                result.usage = result.usage + delta.usage
            if delta.content:
                yielded = True
                yield delta.content
    except LLMError as exc:
        if yielded:
            logger.warning("answer stream failed midway, keeping the partial answer: %s", exc)
            result.status = INCOMPLETE
            result.error = "The model's server stopped sending the answer partway."
            return
        logger.warning("answer stream failed, falling back to the loop's answer: %s", exc)
    if not yielded and result.answer:
        yield result.answer


async def _answer_deltas(
    llm: LLM, messages: list[ChatMessage], cancel: CancelToken | None
) -> AsyncIterator[ChatDelta]:
    """Deltas of the synthesis call, raced against the cancel token.

    The provider's stream is consumed by one pump task (so an HTTP stream is never
    advanced from several tasks) and cancelling that task closes the upstream request.
    """
    _raise_if_cancelled(cancel)
    if not llm.abilities.get("streaming", True):
        response = await run_cancellable(llm.chat(messages), cancel)
        yield ChatDelta(content=response.content, usage=response.usage)
        return
    queue: asyncio.Queue[Any] = asyncio.Queue()
    pump = asyncio.ensure_future(_pump(llm.stream_chat(messages), queue))
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
            with contextlib.suppress(asyncio.CancelledError):
                await pump


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


async def _single(text: str) -> AsyncIterator[str]:
    if text:
        yield text


def _raise_if_cancelled(cancel: CancelToken | None) -> None:
    if cancel is not None:
        cancel.raise_if_cancelled()
