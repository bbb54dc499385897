"""The tool-selection phase: narrow a large registry before the loop starts.

Models pick tools worse (and prompts cost more) when they see dozens of schemas. Above
``TOOL_SELECTION_THRESHOLD`` tools, one cheap structured call over the compact catalog
picks at most ``TOOL_SELECTION_MAX``. Selection only ever narrows: every failure path
returns the full registry, so a broken selector can cost quality but never a tool.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.cancel import CancelledRun, CancelToken
from engine.errors import ScriptExhaustedError
from engine.events import EventCallback, Phase, emit
from engine.llm.base import LLM
from engine.messages import ChatMessage, Usage
from engine.prompts import SELECTION_SYSTEM_PROMPT, selection_user_prompt
from engine.structured import structured_llm_call
from engine.tools import ToolRegistry

__all__ = [
    "TOOL_SELECTION_MAX",
    "TOOL_SELECTION_THRESHOLD",
    "ToolSelection",
    "choose_tools",
    "keyword_pick",
    "select_tools",
]

logger = logging.getLogger(__name__)

TOOL_SELECTION_THRESHOLD = 12
TOOL_SELECTION_MAX = 6

SELECTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"tools": {"type": ["array", "null"], "items": {"type": "string"}}},
    "required": ["tools"],
}

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "into",
        "that",
        "this",
        "what",
        "which",
        "who",
        "how",
        "are",
        "was",
        "were",
        "you",
        "your",
        "can",
        "use",
        "using",
        "get",
        "give",
        "tool",
        "tools",
        "please",
        "about",
        "will",
        "would",
        "could",
        "should",
        "have",
        "has",
        "not",
        "all",
        "any",
        "its",
        "it's",
        "them",
        "they",
        "their",
        "there",
        "then",
        "than",
        "when",
        "where",
    ]
)


@dataclass
class ToolSelection:
    """The outcome of :func:`choose_tools`; ``method`` says how it was reached."""

    registry: ToolRegistry
    method: str  # "not_needed" | "keyword" | "llm" | "fallback"
    usage: Usage = field(default_factory=Usage)


async def select_tools(
    llm: LLM,
    registry: ToolRegistry,
    query: str,
    *,
    on_event: EventCallback | None = None,
    max_tools: int = TOOL_SELECTION_MAX,
    cancel: CancelToken | None = None,
) -> ToolRegistry:
    """The tools this query needs: the registry itself when it is small enough."""
    selection = await choose_tools(
        llm, registry, query, on_event=on_event, max_tools=max_tools, cancel=cancel
    )
    return selection.registry


async def choose_tools(
    llm: LLM,
    registry: ToolRegistry,
    query: str,
    *,
    on_event: EventCallback | None = None,
    max_tools: int = TOOL_SELECTION_MAX,
    cancel: CancelToken | None = None,
) -> ToolSelection:
    """Like :func:`select_tools`, also reporting the method and the tokens spent."""
    if len(registry) <= TOOL_SELECTION_THRESHOLD:
        return ToolSelection(registry, "not_needed")
    await emit(on_event, Phase("selecting_tools", {"total_tools": len(registry)}))

    shortcut = keyword_pick(registry, query)
    if shortcut is not None:
        logger.info("tool selection: keyword shortcut picked %s", shortcut)
        return ToolSelection(registry.filter_by_names([shortcut]), "keyword")

    messages = [
        ChatMessage("system", SELECTION_SYSTEM_PROMPT.format(max_tools=max_tools)),
        ChatMessage("user", selection_user_prompt(query, registry.to_compact_catalog(), max_tools)),
    ]
    try:
        result = await structured_llm_call(
            llm, messages, SELECTION_SCHEMA, "select_tools", default_value=None, cancel=cancel
        )
    except (CancelledRun, ScriptExhaustedError):
        raise
    except Exception as exc:
        logger.warning("tool selection failed, keeping all tools: %s", exc)
        return ToolSelection(registry, "fallback")

    names = _valid_names(result.value, registry, max_tools)
    if not names:
        logger.info("tool selection gave no valid tool name; keeping all %d", len(registry))
        return ToolSelection(registry, "fallback", result.total_usage)
    logger.info("tool selection picked %s of %d tools", names, len(registry))
    return ToolSelection(registry.filter_by_names(names), "llm", result.total_usage)


def _valid_names(value: Any, registry: ToolRegistry, max_tools: int) -> list[str]:
    """Known names in the model's order, without duplicates, cut to ``max_tools``."""
    if not isinstance(value, dict) or not isinstance(value.get("tools"), list):
        return []
    names: list[str] = []
    for name in value["tools"]:
        if isinstance(name, str) and name.strip() in registry and name.strip() not in names:
            names.append(name.strip())
    return names[:max_tools]


def _words(text: str) -> set[str]:
    return {
        w
        for w in (m.lower() for m in _WORD_RE.findall(text.replace("_", " ")))
        if len(w) >= 3 and w not in _STOP_WORDS
    }


def keyword_pick(registry: Iterable[Any], query: str) -> str | None:
    """One tool whose words overlap the query's clearly best, without an LLM call.

    Overlap must be at least 2 and more than twice the runner-up's.
    """
    query_words = _words(query)
    if not query_words:
        return None
    scores = sorted(
        ((len(query_words & _words(f"{t.name} {t.description}")), t.name) for t in registry),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if not scores:
        return None
    best, name = scores[0]
    runner_up = scores[1][0] if len(scores) > 1 else 0
    if best >= 2 and best > 2 * runner_up:
        return name
    return None
