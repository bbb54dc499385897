"""Keeping a conversation inside the model's context window.

The agent asks :class:`ContextGuard` before every LLM call. Under budget nothing happens;
over budget the guard cuts oversized messages, clears old tool results, and then has a
compaction LLM summarise the older part of the history, keeping system messages, pinned
messages and the most recent messages verbatim. Whatever fails, it falls back to
:func:`smart_truncate`, so an unreachable summariser never stops a run.

Two invariants hold for every history this module returns (given an input that satisfies
them): an assistant message that carries tool_calls is never separated from its tool
results, and the non-system history never starts with an assistant or tool message.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.cancel import CancelledRun
from engine.llm.base import LLM, ascii_chars
from engine.messages import ChatMessage

__all__ = [
    "COMPACTION_HINTS",
    "DEFAULT_BUDGET_TOKENS",
    "IMAGE_TOKENS",
    "INTERRUPT_PREFIX",
    "MIN_BUDGET_TOKENS",
    "SUMMARY_PREFIX",
    "TOOL_RESULT_CLEARED",
    "TRUNCATED_MARKER",
    "CompactionResult",
    "ContextGuard",
    "estimate_messages_tokens",
    "estimate_tokens",
    "hint_prompt",
    "model_budget",
    "render_transcript",
    "smart_truncate",
]

logger = logging.getLogger(__name__)

DEFAULT_BUDGET_TOKENS = 32_000
MIN_BUDGET_TOKENS = 4_000
IMAGE_TOKENS = 765
MESSAGE_OVERHEAD_TOKENS = 4
PINNED_SHARE = 0.5

TRUNCATED_MARKER = "\n[Truncated]"
TOOL_RESULT_CLEARED = "[result cleared to save context]"
SUMMARY_PREFIX = "[Conversation summary]:"
INTERRUPT_PREFIX = "[USER INTERRUPT]"
OBSERVATION_PREFIX = "Observation:"

# Per message cap inside the transcript given to the summariser, so one huge message
# cannot crowd out the rest of what it has to read.
TRANSCRIPT_MESSAGE_CHARS = 8_000

_LANGUAGE = "Write in the same language as the conversation."

COMPACTION_HINTS: dict[str, str] = {
    "react_iteration": (
        "You compact the working memory of an AI agent that is in the middle of a task. "
        "Summarise the conversation below so the agent can continue without the original "
        "messages.\n"
        "Keep: the current goal and sub-goal; the most recent reasoning chain and what the "
        "agent intended to do next; the tool results that still matter; exact numbers, "
        "identifiers, names, paths, URLs and error messages; decisions already made.\n"
        "Drop: older reasoning that has been superseded, failed attempts that were later "
        "retried successfully, and verbose tool outputs that are already summarised.\n"
        "Be concise and factual; use short bullet points if that helps. " + _LANGUAGE
    ),
    "planner_input": (
        "You summarise a conversation for a planner that will break the user's request "
        "into steps.\n"
        "Keep: how the user's intent evolved over the conversation, the decisions made, "
        "the constraints and preferences stated, and the data already gathered, with "
        "exact figures.\n"
        "Drop: greetings, small talk and the mechanics of tool calls.\n"
        "Be concise and factual. " + _LANGUAGE
    ),
    "step_dependency": (
        "You summarise the work of one step of a plan for the steps that depend on it.\n"
        "Keep: the outputs, exact numbers, identifiers and conclusions a next step needs.\n"
        "Drop: the reasoning, dead ends and tool mechanics that led to them.\n"
        "Be concise and factual. " + _LANGUAGE
    ),
    "general": (
        "Summarise the conversation below in one concise paragraph.\n"
        "Keep: the facts, decisions and tool results.\n"
        "Drop: greetings, repetition and filler. " + _LANGUAGE
    ),
}


def hint_prompt(hint: str | None) -> str:
    """The summariser's system prompt for ``hint``; unknown hints get ``general``."""
    return COMPACTION_HINTS.get(hint or "general", COMPACTION_HINTS["general"])


# --------------------------------------------------------------------------- estimates


def _text_tokens(text: str) -> float:
    ascii_count = ascii_chars(text)
    return ascii_count / 4 + (len(text) - ascii_count) / 1.5


def _is_image_part(part: dict[str, Any]) -> bool:
    kind = str(part.get("type", ""))
    return kind in {"image_url", "image", "input_image"}


def estimate_tokens(text_or_content: Any) -> int:
    """A cheap, tokenizer-free token estimate.

    ASCII text is about 4 characters a token, other scripts (CJK, Cyrillic...) about 1.5;
    an image part costs a fixed 765. A non-empty text is at least one token. Accepts a
    string, multi-part content (list of ``{"type": ...}`` dicts) or a ChatMessage.
    """
    if text_or_content is None:
        return 0
    if isinstance(text_or_content, ChatMessage):
        return estimate_messages_tokens([text_or_content])
    if isinstance(text_or_content, str):
        if not text_or_content:
            return 0
        return max(1, math.ceil(_text_tokens(text_or_content)))
    if isinstance(text_or_content, list | tuple):
        total = 0
        for part in text_or_content:
            if isinstance(part, str):
                total += estimate_tokens(part)
            elif isinstance(part, dict):
                if _is_image_part(part):
                    total += IMAGE_TOKENS
                else:
                    total += estimate_tokens(part.get("text") or "")
        return total
    return estimate_tokens(str(text_or_content))


def _message_tokens(message: ChatMessage) -> int:
    total = MESSAGE_OVERHEAD_TOKENS + estimate_tokens(message.content)
    for call in message.tool_calls or ():
        args = json.dumps(call.arguments, ensure_ascii=False, default=str)
        total += estimate_tokens(call.name) + estimate_tokens(args)
    return total


def estimate_messages_tokens(messages: Sequence[ChatMessage]) -> int:
    """Estimated prompt size of ``messages``: content, tool calls and 4 a message."""
    return sum(_message_tokens(m) for m in messages)


def model_budget(context_window: int | None, max_output_tokens: int | None) -> int:
    """The prompt budget of a model: its window minus the room kept for the answer."""
    if not context_window or context_window <= 0:
        return DEFAULT_BUDGET_TOKENS
    return max(MIN_BUDGET_TOKENS, context_window - (max_output_tokens or 0))


# --------------------------------------------------------------------------- units


@dataclass
class _Unit:
    """Messages that must stay together: one message, or a tool call with its results."""

    indices: list[int]
    pinned: bool
    first_role: str


def _is_summary(message: ChatMessage) -> bool:
    return message.role == "system" and message.text().startswith(SUMMARY_PREFIX)


def _build_units(messages: Sequence[ChatMessage]) -> list[_Unit]:
    """Group the non-system messages so that no split can orphan a tool result.

    A tool result is attached to the assistant message that requested it, even when the
    input has something in between (the group is then emitted contiguously, which is the
    order providers require anyway). A tool result whose call is missing stays alone.
    """
    units: list[_Unit] = []
    owner: dict[str, _Unit] = {}
    for index, message in enumerate(messages):
        if message.role == "system":
            continue
        if message.role == "tool" and message.tool_call_id in owner:
            unit = owner[message.tool_call_id]
            unit.indices.append(index)
            unit.pinned = unit.pinned or message.pinned
            continue
        unit = _Unit([index], message.pinned, message.role)
        units.append(unit)
        if message.role == "assistant":
            for call in message.tool_calls or ():
                owner[call.id] = unit
    return units


def _unit_tokens(messages: Sequence[ChatMessage], unit: _Unit) -> int:
    return sum(_message_tokens(messages[i]) for i in unit.indices)


def _emit(
    messages: Sequence[ChatMessage], keep_system: bool, units: Sequence[_Unit]
) -> list[ChatMessage]:
    """Messages of ``units`` in order, tool groups contiguous; system ones if asked."""
    by_first = {unit.indices[0]: unit for unit in units}
    out: list[ChatMessage] = []
    for index, message in enumerate(messages):
        if message.role == "system":
            if keep_system:
                out.append(message)
        elif index in by_first:
            out.extend(messages[i] for i in by_first[index].indices)
    return out


# --------------------------------------------------------------------------- cutting


def _cut_text(text: str, limit: int) -> str:
    return text[: max(0, limit)] + TRUNCATED_MARKER


def _cut_message(message: ChatMessage, limit: int) -> ChatMessage:
    """``message`` with every text longer than ``limit`` characters cut, marked."""
    content = message.content
    if isinstance(content, str):
        if len(content) <= limit:
            return message
        return replace(message, content=_cut_text(content, limit))
    if isinstance(content, list):
        changed = False
        parts: list[Any] = []
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if isinstance(text, str) and len(text) > limit:
                parts.append({**part, "text": _cut_text(text, limit)})
                changed = True
            else:
                parts.append(part)
        if changed:
            return replace(message, content=parts)
    return message


def _fit_unit(
    messages: list[ChatMessage], unit: _Unit, budget: int
) -> dict[int, ChatMessage] | None:
    """Cut the texts of ``unit`` so it fits ``budget`` tokens, or None if it cannot.

    Used for the newest messages only: a huge last tool result is better seen cut than
    not seen at all (the model would just call the tool again).
    """
    if budget < 64:
        return None
    originals = {i: messages[i] for i in unit.indices}
    longest = max(len(m.text()) for m in originals.values())
    if longest == 0:
        return None
    total = sum(_message_tokens(m) for m in originals.values())
    limit = int(longest * budget / max(total, 1))
    for _ in range(12):
        cut = {i: _cut_message(m, limit) for i, m in originals.items()}
        if sum(_message_tokens(m) for m in cut.values()) <= budget:
            return cut
        limit = int(limit * 0.7)
        if limit < 1:
            break
    return None


def _fit_pair(
    messages: list[ChatMessage], first: _Unit, second: _Unit, budget: int
) -> dict[int, ChatMessage] | None:
    """Cut ``first`` (an anchoring user message) and ``second`` to share ``budget``."""
    first_cost = _unit_tokens(messages, first)
    share = min(first_cost, budget // 2)
    first_cut = {} if first_cost <= share else _fit_unit(messages, first, share)
    if first_cut is None:
        return None
    used = sum(_message_tokens(first_cut.get(i, messages[i])) for i in first.indices)
    rest = budget - used
    second_cut = {} if _unit_tokens(messages, second) <= rest else _fit_unit(messages, second, rest)
    if second_cut is None:
        return None
    return {**first_cut, **second_cut}


# --------------------------------------------------------------------------- truncation


def smart_truncate(messages: Sequence[ChatMessage], budget_tokens: int) -> list[ChatMessage]:
    """Drop the oldest history until ``messages`` fit ``budget_tokens``; no LLM involved.

    System and pinned messages are always kept. The rest is walked back from the newest,
    whole tool groups at a time, until the budget is spent; if even the newest group does
    not fit, its texts are cut. The kept history never starts with an assistant or tool
    message: the latest earlier user message is brought along (dropping older groups to
    make room) or the offending groups are dropped.
    """
    source = list(messages)
    msgs = list(source)
    units = _build_units(msgs)
    fixed = sum(_message_tokens(m) for m in msgs if m.role == "system")
    fixed += sum(_unit_tokens(msgs, u) for u in units if u.pinned)
    remaining = budget_tokens - fixed
    cost = {k: _unit_tokens(msgs, u) for k, u in enumerate(units)}

    kept: set[int] = set()
    for k in range(len(units) - 1, -1, -1):
        unit = units[k]
        if unit.pinned:
            continue
        if cost[k] <= remaining:
            kept.add(k)
            remaining -= cost[k]
            continue
        if not kept:
            cut = _fit_unit(msgs, unit, remaining)
            if cut is not None:
                for i, m in cut.items():
                    msgs[i] = m
                cost[k] = _unit_tokens(msgs, unit)
                kept.add(k)
                remaining -= cost[k]
        break

    pinned = {k for k, u in enumerate(units) if u.pinned}

    def first() -> int | None:
        present = kept | pinned
        return min(present) if present else None

    head = first()
    if head is not None and not units[head].pinned and units[head].first_role != "user":
        anchor = next(
            (
                k
                for k in range(head - 1, -1, -1)
                if not units[k].pinned and units[k].first_role == "user"
            ),
            None,
        )
        placed = False
        if anchor is not None:
            trial = sorted(kept)
            room = remaining
            while cost[anchor] > room and len(trial) > 1:
                room += cost[trial.pop(0)]
            if cost[anchor] <= room:
                kept = set(trial) | {anchor}
                remaining = room - cost[anchor]
                placed = True
            else:
                # Not even the anchor and the newest group fit whole: share the room,
                # cutting both, rather than sending a history with no user message.
                newest = max(kept)
                cuts = _fit_pair(source, units[anchor], units[newest], budget_tokens - fixed)
                if cuts is not None:
                    msgs = list(source)
                    for i, m in cuts.items():
                        msgs[i] = m
                    kept = {anchor, newest}
                    placed = True
        while not placed:
            head = first()
            if head is None or units[head].pinned or units[head].first_role == "user":
                break
            kept.discard(head)
            remaining += cost[head]

    chosen = [units[k] for k in sorted(kept | pinned)]
    out = _emit(msgs, True, chosen)
    dropped = len(messages) - len(out)
    if dropped:
        logger.info("smart_truncate dropped %d of %d messages", dropped, len(messages))
    return out


# --------------------------------------------------------------------------- summariser input


def _render_message(message: ChatMessage) -> str:
    text = message.text()
    if isinstance(message.content, list):
        images = sum(1 for p in message.content if isinstance(p, dict) and _is_image_part(p))
        text = (text + " [image]" * images).strip()
    if len(text) > TRANSCRIPT_MESSAGE_CHARS:
        text = _cut_text(text, TRANSCRIPT_MESSAGE_CHARS)
    if message.role == "assistant":
        lines = [f"[assistant]: {text}"] if text else []
        for call in message.tool_calls or ():
            args = json.dumps(call.arguments, ensure_ascii=False, default=str)
            lines.append(f"[assistant called tool {call.name}]: {args}")
        return "\n".join(lines) or "[assistant]: (empty)"
    if message.role == "tool":
        label = message.name or message.tool_call_id or "tool"
        return f"[tool result {label}]: {text}"
    return f"[{message.role}]: {text}"


def render_transcript(messages: Sequence[ChatMessage]) -> str:
    """The plain-text transcript the summariser reads."""
    return "\n\n".join(_render_message(m) for m in messages)


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


# --------------------------------------------------------------------------- the guard


@dataclass
class CompactionResult:
    """What one compaction did, so the web layer can store and show it.

    ``original_messages`` / ``kept_messages`` are counts before and after (the ``compact``
    event's fields); ``messages`` is the compacted history itself. ``summary`` is the new
    summary text (None when no summary was produced, e.g. after a truncation fallback);
    ``summarised_count`` is how many messages it covers and ``covered_until`` the index,
    in the input list, of the newest of them. ``method`` is one of ``unchanged``, ``cut``,
    ``cleared``, ``summary``, ``summary+truncate``, ``truncate``.
    """

    original_messages: int
    kept_messages: int
    summary: str | None = None
    summarised_count: int = 0
    messages: list[ChatMessage] = field(default_factory=list)
    covered_until: int | None = None
    method: str = "unchanged"


@dataclass
class _Plan:
    lead: list[_Unit]
    recent: list[_Unit]
    summarised: list[_Unit]


class ContextGuard:
    """Keeps the history handed to the LLM under a token budget (see module docstring)."""

    def __init__(
        self,
        budget_tokens: int = DEFAULT_BUDGET_TOKENS,
        compact_llm: LLM | None = None,
        keep_recent: int = 4,
        max_message_chars: int = 50_000,
        max_tool_results: int = 6,
    ) -> None:
        self.budget_tokens = budget_tokens
        self.compact_llm = compact_llm
        self.keep_recent = max(0, keep_recent)
        self.max_message_chars = max_message_chars
        self.max_tool_results = max(0, max_tool_results)
        # The most recent compaction this guard performed; not reset by calls that were
        # under budget, so it can be read after the run.
        self.last_compaction: CompactionResult | None = None

    # ------------------------------------------------------------------ public API

    async def check_and_compact(
        self,
        messages: list[ChatMessage],
        *,
        hint: str = "react_iteration",
        budget_tokens: int | None = None,
    ) -> list[ChatMessage]:
        """``messages`` itself when under budget, otherwise a compacted copy.

        ``budget_tokens`` overrides the guard's budget for this call (the agent passes
        half the budget after the provider reported a context overflow). Never raises
        because of the summariser; the input list is never modified.
        """
        budget = budget_tokens or self.budget_tokens
        if estimate_messages_tokens(messages) <= budget:
            return messages
        result = await self.compact(messages, hint=hint, budget_tokens=budget)
        self.last_compaction = result
        return result.messages

    async def compact(
        self,
        messages: Sequence[ChatMessage],
        *,
        hint: str = "react_iteration",
        budget_tokens: int | None = None,
        previous_summary: str | None = None,
    ) -> CompactionResult:
        """Compact ``messages`` to the budget and report how.

        Returns an ``unchanged`` result when they already fit. ``previous_summary`` (or a
        ``[Conversation summary]:`` system message already in ``messages``) is handed to the
        summariser so the new summary extends it instead of starting over.
        """
        budget = budget_tokens or self.budget_tokens
        original = list(messages)
        count = len(original)

        def done(
            out: list[ChatMessage],
            method: str,
            summary: str | None = None,
            covered: list[int] | None = None,
        ) -> CompactionResult:
            summarised = len(covered) if covered else 0
            until = max(covered) if covered else None
            return CompactionResult(count, len(out), summary, summarised, out, until, method)

        if estimate_messages_tokens(original) <= budget:
            return done(original, "unchanged")

        working = [self._cut_oversized(m) for m in original]
        if estimate_messages_tokens(working) <= budget:
            logger.info("context: cut oversized messages to fit %d tokens", budget)
            return done(working, "cut")

        working = self._clear_old_tool_results(working)
        if estimate_messages_tokens(working) <= budget:
            logger.info("context: cleared old tool results to fit %d tokens", budget)
            return done(working, "cleared")

        working = _release_pins(working, budget)

        previous = [previous_summary.strip()] if previous_summary else []
        previous += [m.text()[len(SUMMARY_PREFIX) :].strip() for m in working if _is_summary(m)]
        previous_text = "\n\n".join(p for p in previous if p) or None

        plan = self._plan(working, budget)
        if plan is None or self.compact_llm is None:
            reason = "no compaction LLM" if self.compact_llm is None else "nothing to summarise"
            logger.info("context: %s, truncating to %d tokens", reason, budget)
            return done(smart_truncate(working, budget), "truncate")

        covered = sorted(i for u in plan.summarised for i in u.indices)
        to_summarise = [working[i] for i in covered]
        try:
            summary = await self.summarise(to_summarise, hint, previous_summary=previous_text)
        except CancelledRun:
            raise
        except Exception as exc:
            logger.warning("context: summariser failed (%r), truncating instead", exc)
            logger.debug("context: summariser failure", exc_info=True)
            return done(smart_truncate(working, budget), "truncate")
        if not summary:
            logger.warning("context: summariser returned nothing, truncating instead")
            return done(smart_truncate(working, budget), "truncate")

        system = [m for m in working if m.role == "system" and not _is_summary(m)]
        out = system + _emit(working, False, plan.lead)
        out.append(ChatMessage(role="system", content=f"{SUMMARY_PREFIX} {summary}"))
        out += _emit(working, False, plan.recent)
        method = "summary"
        if estimate_messages_tokens(out) > budget:
            out = smart_truncate(out, budget)
            method = "summary+truncate"
        logger.info(
            "context: summarised %d messages (%s), %d -> %d messages",
            len(covered),
            hint,
            count,
            len(out),
        )
        return done(out, method, summary, covered)

    async def summarise(
        self,
        messages: Sequence[ChatMessage],
        hint: str = "react_iteration",
        previous_summary: str | None = None,
    ) -> str:
        """The compaction LLM's summary of ``messages`` ("" if it said nothing).

        With ``previous_summary`` the summariser is asked to extend it with the newer
        messages, so a stored summary grows incrementally. Raises whatever the LLM raises;
        callers decide how to fall back.
        """
        if self.compact_llm is None:
            raise RuntimeError("ContextGuard has no compaction LLM")
        transcript = render_transcript(messages)
        if previous_summary:
            body = (
                "Summary of the earlier conversation:\n"
                f"{previous_summary}\n\n"
                "Extend that summary with the newer messages below, keeping what still "
                "matters from it, and reply with the complete updated summary only.\n\n"
                f"Newer messages:\n\n{transcript}"
            )
        else:
            body = f"Reply with the summary only.\n\nConversation to summarise:\n\n{transcript}"
        request = [
            ChatMessage(role="system", content=hint_prompt(hint)),
            ChatMessage(role="user", content=body),
        ]
        response = await self.compact_llm.chat(request)
        return _THINK.sub("", response.content or "").strip()

    # ------------------------------------------------------------------ steps

    def _cut_oversized(self, message: ChatMessage) -> ChatMessage:
        return _cut_message(message, self.max_message_chars)

    def _clear_old_tool_results(self, messages: list[ChatMessage]) -> list[ChatMessage]:
        """All but the newest ``max_tool_results`` tool results become a short note.

        JSON-mode observations (user messages starting ``Observation:``) count as tool
        results too. Pinned messages are left alone.
        """
        positions = [
            i
            for i, m in enumerate(messages)
            if not m.pinned
            and (m.role == "tool" or (m.role == "user" and m.text().startswith(OBSERVATION_PREFIX)))
        ]
        old = positions[: max(0, len(positions) - self.max_tool_results)]
        out = list(messages)
        for i in old:
            message = out[i]
            note = TOOL_RESULT_CLEARED
            if message.role == "user":
                note = f"{OBSERVATION_PREFIX} {TOOL_RESULT_CLEARED}"
            if message.text() != note:
                out[i] = replace(message, content=note)
        return out

    def _plan(self, messages: list[ChatMessage], budget: int) -> _Plan | None:
        """Choose which units to keep verbatim and which to summarise.

        Start with the smallest tail holding ``keep_recent`` messages. A tail starting
        with a tool group is fine when a user message precedes it in the output (a
        pinned query); otherwise the split moves back to the latest user message if that
        still leaves room for the summary, or that user message is kept as an anchor
        ahead of the summary. None when nothing can be summarised.
        """
        units = _build_units(messages)
        if not units:
            return None
        split = len(units)
        seen = 0
        while split > 0 and seen < self.keep_recent:
            split -= 1
            seen += len(units[split].indices)
        if split == 0:
            return None
        # An orphan tool result never opens the kept tail.
        while split < len(units) and units[split].first_role == "tool":
            split += 1

        def is_user(k: int) -> bool:
            return units[k].first_role == "user"

        anchor: int | None = None
        opens_with_user = split < len(units) and is_user(split)
        lead_has_user = any(u.pinned and u.first_role == "user" for u in units[:split])
        if not opens_with_user and not lead_has_user:
            back = next(
                (k for k in range(split - 1, -1, -1) if not units[k].pinned and is_user(k)),
                None,
            )
            if back is None:
                forward = next((k for k in range(split + 1, len(units)) if is_user(k)), None)
                if forward is not None:
                    split = forward
            else:
                system = [m for m in messages if m.role == "system" and not _is_summary(m)]
                kept = [u for u in units[:back] if u.pinned] + units[back:]
                size = estimate_messages_tokens(system + _emit(messages, False, kept))
                summarisable = any(not u.pinned for u in units[:back])
                if summarisable and size <= budget * 0.8:
                    split = back
                else:
                    anchor = back

        older = units[:split]
        summarised = [u for u in older if not u.pinned]
        if not summarised:
            return None
        lead = [u for k, u in enumerate(older) if u.pinned or k == anchor]
        return _Plan(lead=lead, recent=units[split:], summarised=summarised)


def _release_pins(messages: list[ChatMessage], budget: int) -> list[ChatMessage]:
    """Unpin the older pins when pinned messages take more than half the budget.

    The current query (the last pinned user message that is not an interrupt) and the
    newest ``[USER INTERRUPT]`` message stay pinned; the rest go to compaction.
    """
    pinned = [i for i, m in enumerate(messages) if m.pinned and m.role != "system"]
    if len(pinned) <= 1:
        return messages
    size = estimate_messages_tokens([messages[i] for i in pinned])
    if size <= budget * PINNED_SHARE:
        return messages
    query = next(
        (
            i
            for i in reversed(pinned)
            if messages[i].role == "user" and not messages[i].text().startswith(INTERRUPT_PREFIX)
        ),
        None,
    )
    interrupt = next(
        (i for i in reversed(pinned) if messages[i].text().startswith(INTERRUPT_PREFIX)), None
    )
    keep = {query, interrupt}
    out = list(messages)
    released = 0
    for i in pinned:
        if i not in keep:
            out[i] = replace(out[i], pinned=False)
            released += 1
    if released:
        logger.info("context: pinned messages over half the budget, released %d", released)
    return out
