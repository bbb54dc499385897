"""The answer phase: end the run's answer, then end the run with ``Done``.

Most answers streamed while the loop ran (:mod:`engine.replies`): this phase only closes
them. A run that used tools, on a model set to rewrite its answers, gets a separate
streamed call over the conversation and the loop's work (:func:`_rewrite`); a paused or
failed run streams its explanation verbatim.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

from engine import prompts
from engine.cancel import CancelledRun, CancelToken
from engine.events import AgentEvent, AnswerDelta, AnswerDone, AnswerStart, Done
from engine.llm.base import LLM, LLMError
from engine.messages import ChatMessage
from engine.outcomes import CANCELLED, INCOMPLETE, PAUSED, SUCCEEDED, AgentResult, ContextGuardLike
from engine.streaming import cut_usage, stream_deltas

__all__ = [
    "CANCELLED",
    "INCOMPLETE",
    "PAUSED",
    "SUCCEEDED",
    "finish",
    "length_limit_reason",
    "stream_answer",
]

logger = logging.getLogger(__name__)

# An answer longer than this many tokens (estimated as characters / 4) is cut: a model
# that never stops would otherwise stream until Stop.
DEFAULT_MAX_ANSWER_TOKENS = 4096
CHARS_PER_TOKEN = 4

REWRITE_FAILED = "The answer could not be rewritten; this is the model's first answer."

Emit = Callable[[AgentEvent], Awaitable[None]]


def length_limit_reason(limit: int) -> str:
    return f"The answer reached its length limit ({limit} tokens) and was cut."


async def stream_answer(
    llm: LLM,
    result: AgentResult,
    query: str,
    *,
    cancel: CancelToken | None,
    emit: Emit,
    max_tokens: int | None = None,
    rewrite: bool = False,
    context_guard: ContextGuardLike | None = None,
) -> AsyncIterator[str]:
    """Yield the answer's text, then emit ``AnswerDone`` and ``Done``.

    An answer the loop streamed is yielded at once (its deltas went out already). With
    ``rewrite``, a succeeded run that used tools gets its answer rewritten by a streamed
    call; if that fails before its first chunk the loop's answer stands and ``Done`` says
    so, if it fails midway (or passes ``max_tokens``) what streamed is the answer and
    ``result.status`` becomes ``incomplete``. A paused or failed run's explanation streams
    as is. On cancellation ``result.status`` becomes ``cancelled`` and neither
    ``AnswerDone`` nor ``Done`` follows.
    """
    if result.status == CANCELLED or (cancel is not None and cancel.cancelled):
        result.status = CANCELLED
        return
    if result.answer_streamed and not (rewrite and result.steps and result.status == SUCCEEDED):
        if result.answer:
            yield result.answer
        await emit(AnswerDone())
        await finish(result, emit=emit)
        return
    started = time.perf_counter()
    await emit(AnswerStart())
    parts: list[str] = []
    try:
        if result.status == SUCCEEDED and rewrite and result.steps:
            limit = max_tokens or DEFAULT_MAX_ANSWER_TOKENS
            source = _capped(_rewrite(llm, result, query, cancel, context_guard), result, limit)
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
    """Emit the run's one ``Done`` event (``stream_answer`` calls this at its end); its
    ``reason`` says why an answer is incomplete, or what else a reader should know."""
    text = result.answer if answer is None else answer
    if result.status == INCOMPLETE:
        status, reason = INCOMPLETE, result.error or "The answer is incomplete."
    elif result.status == PAUSED:
        status, reason = PAUSED, result.error or ""
    else:
        status, reason = SUCCEEDED, result.error or ""
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
                result.error = length_limit_reason(limit)
                return
            budget -= len(chunk)
            yield chunk
    finally:
        await chunks.aclose()  # type: ignore[attr-defined]


async def _rewrite(
    llm: LLM,
    result: AgentResult,
    query: str,
    cancel: CancelToken | None,
    guard: ContextGuardLike | None,
) -> AsyncIterator[str]:
    """Chunks of the rewritten answer; the loop's answer (said so) when the call fails
    before its first chunk. The call sees the conversation as the loop did."""
    trace = [(s.tool_name, s.tool_args, s.observation) for s in result.steps]
    messages = [
        ChatMessage("system", prompts.SYNTHESIS_SYSTEM_PROMPT),
        *(m for m in result.history if m.role != "system"),
        ChatMessage("user", prompts.synthesis_user_prompt(query, trace, result.answer)),
    ]
    if guard is not None:
        messages = await guard.check_and_compact(messages, hint="general")
    shown: list[str] = []
    counted = False
    try:
        async with contextlib.aclosing(stream_deltas(llm, messages, cancel=cancel)) as deltas:
            try:
                async for delta in deltas:
                    if delta.usage is not None:
                        result.usage, counted = result.usage + delta.usage, True
                    if delta.content:
                        shown.append(delta.content)
                        yield delta.content
            finally:
                if not counted and result.status == INCOMPLETE:  # cut by _capped
                    result.usage = result.usage + cut_usage(messages, "".join(shown))
    except LLMError as exc:
        if shown:
            logger.warning("rewrite failed midway, keeping the partial answer: %s", exc)
            result.status = INCOMPLETE
            result.error = "The model's server stopped sending the answer partway."
            return
        logger.warning("rewrite failed, keeping the loop's answer: %s", exc)
    if not shown and result.answer:
        result.error = REWRITE_FAILED
        yield result.answer


async def _single(text: str) -> AsyncIterator[str]:
    if text:
        yield text
