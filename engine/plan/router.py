"""Auto mode: ask a (small) model whether a request is worth a plan.

Plan mode pays for a planner and an analyzer call, so it only helps when the work splits
into parts that run in parallel. One structured call decides; any failure means ReAct,
which handles every request.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Literal

from engine.cancel import CancelledRun, CancelToken
from engine.llm.base import LLM
from engine.messages import ChatMessage
from engine.plan import prompts
from engine.plan.common import cut
from engine.structured import structured_llm_call

__all__ = ["ROUTER_SCHEMA", "choose_mode"]

logger = logging.getLogger(__name__)

Mode = Literal["react", "plan"]

ROUTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "description": '"react" or "plan".'},
        "reason": {"type": ["string", "null"]},
    },
    "required": ["mode"],
}
# The conversation the router sees: a request like "same for Paris" needs its context.
ROUTER_HISTORY_MESSAGES = 6
ROUTER_MESSAGE_CHARS = 500


def _mode(raw: Any) -> Mode | None:
    value = str(raw.get("mode") or "").strip().lower() if isinstance(raw, dict) else ""
    if value in ("plan", "dag", "parallel"):
        return "plan"
    if value in ("react", "direct", "sequential"):
        return "react"
    return None


async def choose_mode(
    llm: LLM,
    query: str,
    history: Sequence[ChatMessage] = (),
    *,
    cancel: CancelToken | None = None,
) -> Mode:
    """``"plan"`` when the request splits into independent parallel parts, else
    ``"react"`` (also on any failure)."""
    recent = [m for m in history if m.role in ("user", "assistant") and m.text().strip()]
    transcript = "\n".join(
        f"[{m.role}]: {cut(m.text(), ROUTER_MESSAGE_CHARS)}"
        for m in recent[-ROUTER_HISTORY_MESSAGES:]
    )
    messages = [
        ChatMessage("system", prompts.ROUTER_SYSTEM_PROMPT),
        ChatMessage("user", prompts.router_user_prompt(query, transcript)),
    ]
    try:
        result = await structured_llm_call(
            llm,
            messages,
            ROUTER_SCHEMA,
            "choose_mode",
            parse_fn=_mode,
            default_value="react",
            cancel=cancel,
        )
    except CancelledRun:
        raise
    except Exception as exc:
        logger.warning("mode routing failed, using react: %s", exc)
        return "react"
    mode: Mode = result.value
    logger.info("mode routing chose %s (via %s)", mode, result.level_used)
    return mode
