"""Small helpers the planner, executor, analyzer and agent of plan mode share."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from engine.context import SUMMARY_PREFIX, render_transcript
from engine.interrupts import InterruptSource
from engine.llm.base import LLM
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage

__all__ = [
    "CUT_MARKER",
    "cut",
    "drain_followups",
    "history_text",
    "llm_for_role",
    "model_name",
]

logger = logging.getLogger(__name__)

CUT_MARKER = "\n[... cut]"
# The conversation as the planner and analyzer read it: the newest messages, this long.
HISTORY_MESSAGES = 20
HISTORY_CHARS = 12_000


def cut(text: str, limit: int) -> str:
    """``text`` up to ``limit`` characters, saying so when something was cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit)] + CUT_MARKER


def llm_for_role(registry: ModelRegistry, role: str | None, fallback: LLM) -> LLM:
    """The model registered for ``role``; ``fallback`` (the conversation's model) when no
    model has that role (``get_by_role`` alone would fall back to the registry default)."""
    if role and registry.has_role(role):
        return registry.get_by_role(role)
    return fallback


def model_name(registry: ModelRegistry, llm: LLM) -> str:
    """A display name: the registry's name for ``llm``, else its ``model``, else its type."""
    name = registry.name_of(llm)
    if name:
        return name
    model = getattr(llm, "model", None)
    return model if isinstance(model, str) and model else type(llm).__name__


def drain_followups(queue: InterruptSource | None) -> list[str]:
    """What the user sent meanwhile (blank messages dropped)."""
    if queue is None:
        return []
    return [text for text in queue.drain() if text and text.strip()]


def history_text(messages: Sequence[ChatMessage]) -> str:
    """The conversation so far as a transcript, newest kept when it is too long."""
    shown = [m for m in messages if m.role != "system" or m.text().startswith(SUMMARY_PREFIX)]
    text = render_transcript(shown[-HISTORY_MESSAGES:])
    if len(text) > HISTORY_CHARS:
        text = "[... earlier conversation cut]\n" + text[-HISTORY_CHARS:]
    return text
