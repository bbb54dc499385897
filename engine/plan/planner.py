"""The planner: one structured call that turns the goal into a validated :class:`Plan`.

The schema sent to the model describes the ideal plan, but its types are loose on
purpose (ids as numbers, dependencies as text, any model hint): the structured call
validates against it before :func:`parse_plan` runs, and a strict schema would throw away
plans that parse fine. Parsing and validation run as the call's ``parse_fn``, so a plan
with a cycle counts as a failed level and the next level asks again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.cancel import CancelToken
from engine.llm.base import LLM
from engine.messages import ChatMessage, Usage
from engine.plan import prompts
from engine.plan.model import Plan, PlanError, parse_plan, validate_plan
from engine.plan.results import ExecutionReport
from engine.structured import structured_llm_call
from engine.tools import ToolRegistry

__all__ = ["PLAN_SCHEMA", "PlannerOutcome", "make_plan"]

logger = logging.getLogger(__name__)

FUNCTION_NAME = "submit_plan"

_ID = {"type": ["string", "integer"]}
PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": {
            "type": ["array", "object", "string"],
            "description": "The steps, as parallel as possible.",
            "items": {
                "type": ["object", "string"],
                "properties": {
                    "id": {**_ID, "description": "Short unique id, e.g. s1."},
                    "task": {
                        "type": "string",
                        "description": "Self-contained task, in the goal's language.",
                    },
                    "dependencies": {
                        "type": ["array", "string", "null"],
                        "items": _ID,
                        "description": "Ids of the steps whose results this step needs.",
                    },
                    "tool_hint": {"type": ["string", "null"]},
                    "model_hint": {
                        "type": ["string", "null"],
                        "description": '"fast", "reasoning" or null.',
                    },
                },
            },
        }
    },
    "required": ["steps"],
}


@dataclass
class PlannerOutcome:
    """The plan (None: the model gave nothing usable, ``error`` says why) and the tokens
    the call spent either way."""

    plan: Plan | None
    usage: Usage = field(default_factory=Usage)
    error: str | None = None


async def make_plan(
    llm: LLM,
    goal: str,
    *,
    tools: ToolRegistry,
    history: str = "",
    max_steps: int = 10,
    reports: Sequence[ExecutionReport] = (),
    reason: str | None = None,
    instructions: Sequence[str] = (),
    latest_chars: int = 500,
    older_chars: int = 200,
    system_prompt: str | None = None,
    cancel: CancelToken | None = None,
) -> PlannerOutcome:
    """Plan ``goal`` (a replan when ``reports`` holds earlier rounds). Never raises for a
    bad plan or a failed model: the outcome's ``plan`` is None. Cancellation propagates."""
    rounds = prompts.render_rounds(reports, latest_chars, older_chars) if reports else ""
    messages = [
        ChatMessage("system", prompts.planner_system_prompt(max_steps, system_prompt)),
        ChatMessage(
            "user",
            prompts.planner_user_prompt(
                goal,
                history=history,
                catalog=tools.to_compact_catalog(),
                rounds=rounds,
                reason=reason,
                instructions=instructions,
            ),
        ),
    ]
    problems: list[str] = []

    def parse(raw: Any) -> Plan:
        try:
            return validate_plan(parse_plan(raw), max_steps)
        except PlanError as exc:
            problems.append(str(exc))
            raise

    result = await structured_llm_call(
        llm,
        messages,
        PLAN_SCHEMA,
        FUNCTION_NAME,
        parse_fn=parse,
        default_value=None,
        description="Submit the plan: the steps that achieve the user's goal.",
        cancel=cancel,
    )
    if result.value is None:
        error = problems[-1] if problems else "the model did not return a plan"
        logger.warning("planning failed after %d call(s): %s", result.llm_calls, error)
        return PlannerOutcome(None, result.total_usage, error)
    logger.info("plan of %d step(s) via %s", len(result.value), result.level_used)
    return PlannerOutcome(result.value, result.total_usage)
