"""The analyzer: did the plan's results achieve the goal, and how sure is it?

One structured call. Its verdict decides whether plan mode replans (:func:`should_replan`);
a verdict that cannot be read counts as "not achieved, confidence 0", which replans while
rounds are left: a broken analyzer costs a round, never the answer.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.cancel import CancelToken
from engine.llm.base import LLM
from engine.messages import ChatMessage, Usage
from engine.plan import prompts
from engine.plan.config import PlanConfig
from engine.plan.results import ExecutionReport
from engine.structured import structured_llm_call

__all__ = [
    "ANALYSIS_SCHEMA",
    "Analysis",
    "analysis_from_text",
    "analyze",
    "parse_analysis",
    "should_replan",
]

logger = logging.getLogger(__name__)

FUNCTION_NAME = "submit_analysis"
# Results of rounds before the latest, as the analyzer reads them.
OLDER_RESULT_CHARS = 2_000
REASONING_FROM_TEXT_CHARS = 500

# Loose types on purpose: "0.9" and "yes" are read by parse_analysis, not rejected.
ANALYSIS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "achieved": {"type": ["boolean", "string"]},
        "confidence": {"type": ["number", "string"], "description": "From 0 to 1."},
        "final_answer": {"type": ["string", "null"]},
        "reasoning": {"type": ["string", "null"]},
    },
    "required": ["achieved", "confidence"],
}

_TRUE = frozenset({"true", "yes", "y", "1", "achieved"})
_ACHIEVED_KV = re.compile(
    r"achieved[\"'*]*\s*(?:[:=]|is|was)?\s*[\"'*]*\s*(true|false|yes|no)\b", re.IGNORECASE
)
_ACHIEVED_PHRASE = re.compile(
    r"\b(not(?:\s+been|\s+yet|\s+fully|\s+been\s+fully)?\s+|un)?achieved\b", re.IGNORECASE
)
_CONFIDENCE = re.compile(
    r"confidence[\"'*]*\s*(?:[:=]|is|of)?\s*[\"'*]*\s*(\d+(?:[.,]\d+)?)\s*(%)?", re.IGNORECASE
)


@dataclass
class Analysis:
    """The analyzer's verdict; ``level`` is how it was obtained (``default``: it failed)."""

    achieved: bool
    confidence: float
    final_answer: str = ""
    reasoning: str = ""
    usage: Usage = field(default_factory=Usage)
    level: str = ""


def _clamp(value: float) -> float:
    if math.isnan(value):
        return 0.0
    return min(1.0, max(0.0, value))


def _confidence(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return _clamp(float(value))
    if isinstance(value, str):
        text = value.strip().replace(",", ".")
        percent = text.endswith("%")
        try:
            number = float(text.rstrip("%").strip())
        except ValueError:
            return 0.0
        return _clamp(number / 100 if percent else number)
    return 0.0


def _achieved(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return bool(value)


def parse_analysis(raw: Any) -> Analysis:
    """An :class:`Analysis` from the model's object; confidence clamped into [0, 1]."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object, got {type(raw).__name__}")
    return Analysis(
        achieved=_achieved(raw.get("achieved")),
        confidence=_confidence(raw.get("confidence")),
        final_answer=str(raw.get("final_answer") or "").strip(),
        reasoning=str(raw.get("reasoning") or "").strip(),
    )


def analysis_from_text(text: str) -> dict[str, Any] | None:
    """The verdict of a free-text reply ("achieved: yes, confidence 85%"), or None.

    A missing confidence is 1 when the text says achieved and 0 otherwise.
    """
    kv = _ACHIEVED_KV.search(text)
    phrase = None if kv else _ACHIEVED_PHRASE.search(text)
    number = _CONFIDENCE.search(text)
    if kv is None and phrase is None and number is None:
        return None
    if kv is not None:
        achieved = kv.group(1).lower() in _TRUE
    else:
        achieved = phrase is not None and not phrase.group(1)
    if number is not None:
        value = float(number.group(1).replace(",", "."))
        confidence = _clamp(value / 100 if number.group(2) else value)
    else:
        confidence = 1.0 if achieved else 0.0
    return {
        "achieved": achieved,
        "confidence": confidence,
        "final_answer": "",
        "reasoning": text.strip()[:REASONING_FROM_TEXT_CHARS],
    }


def should_replan(analysis: Analysis, config: PlanConfig, replans_used: int) -> bool:
    """Replan when the goal is not achieved, confidence is under the target, and the
    replan budget is not spent (follow-ups replan without touching it)."""
    if analysis.achieved or analysis.confidence >= config.confidence_target:
        return False
    return replans_used < config.max_replans


async def analyze(
    llm: LLM,
    goal: str,
    reports: Sequence[ExecutionReport],
    *,
    history: str = "",
    instructions: Sequence[str] = (),
    result_chars: int = 10_000,
    cancel: CancelToken | None = None,
) -> Analysis:
    """The verdict on all rounds so far; never raises but for cancellation."""
    results = prompts.render_results(reports, result_chars, min(result_chars, OLDER_RESULT_CHARS))
    messages = [
        ChatMessage("system", prompts.ANALYZER_SYSTEM_PROMPT),
        ChatMessage(
            "user",
            prompts.analyzer_user_prompt(
                goal, history=history, results=results, instructions=instructions
            ),
        ),
    ]
    default = Analysis(False, 0.0, reasoning="The results could not be checked.")
    result = await structured_llm_call(
        llm,
        messages,
        ANALYSIS_SCHEMA,
        FUNCTION_NAME,
        parse_fn=parse_analysis,
        regex_fallback=analysis_from_text,
        default_value=default,
        description="Submit your verdict on whether the goal is achieved.",
        cancel=cancel,
    )
    analysis: Analysis = result.value
    analysis.usage, analysis.level = result.total_usage, result.level_used
    logger.info(
        "plan analysis via %s: achieved=%s confidence=%.2f",
        result.level_used,
        analysis.achieved,
        analysis.confidence,
    )
    return analysis
