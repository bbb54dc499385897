"""Scripted models for plan-mode tests: replies picked by who is asking.

Plan steps run concurrently, so one script in call order cannot say which reply goes to
which step. A :func:`routed_llm` is a real :class:`ScriptedLLM` whose every item looks at
the request: the planner, analyzer, answer writer and router are told apart by their
system prompts, a step by the task in its query; each has its own queue of replies.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from typing import Any

from engine.errors import ScriptExhaustedError
from engine.messages import ChatMessage
from engine.plan import prompts
from testing.scripted_llm import ScriptedLLM

PLANNER, ANALYZER, ANSWER, ROUTER = "planner", "analyzer", "answer", "router"
OBJECT = {"type": "object"}
_SYSTEM_MARKERS = {
    PLANNER: prompts.planner_system_prompt(10)[:60],
    ANALYZER: prompts.ANALYZER_SYSTEM_PROMPT[:60],
    ANSWER: prompts.ANSWER_SYSTEM_PROMPT[:60],
    ROUTER: prompts.ROUTER_SYSTEM_PROMPT[:60],
}
STEP_MARKER = "## Your step\n"


def who(messages: Sequence[ChatMessage]) -> str:
    """``planner``/``analyzer``/``answer``/``router``; else the task of the asking step,
    or the query of a plain ReAct agent (its pinned user message)."""
    system = next((m.text() for m in messages if m.role == "system"), "")
    for role, marker in _SYSTEM_MARKERS.items():
        if marker in system:
            return role
    users = [m for m in messages if m.role == "user"]
    query = next((m.text() for m in reversed(users) if m.pinned), users[-1].text())
    if STEP_MARKER in query:
        return query.split(STEP_MARKER, 1)[1].split("\n", 1)[0]
    return query


def routed_llm(
    routes: dict[str, list[Any]], *, abilities: dict[str, Any] | None = None, calls: int = 200
) -> ScriptedLLM:
    """A ScriptedLLM answering each asker from its own queue (see module docstring).

    A route's items are ordinary script items (str, dict shorthand, exception, callable).
    ``llm.asked`` lists the askers in call order.
    """
    queues = {key: deque(items) for key, items in routes.items()}
    asked: list[str] = []

    def reply(messages: list[ChatMessage], kwargs: dict[str, Any]) -> Any:
        asker = who(messages)
        asked.append(asker)
        queue = queues.get(asker)
        if not queue:
            raise ScriptExhaustedError(f"no scripted reply left for {asker!r}")
        item = queue.popleft()
        if callable(item) and not isinstance(item, BaseException):
            return item(messages, kwargs)
        return item

    llm = ScriptedLLM([reply] * calls, abilities={"tool_call": True, **(abilities or {})})
    llm.asked = asked  # type: ignore[attr-defined]
    return llm


def plan_reply(*steps: tuple[str, str, list[str]] | dict[str, Any]) -> str:
    """A planner reply: steps as ``(id, task, dependencies)`` or full dicts."""
    items = [
        s if isinstance(s, dict) else {"id": s[0], "task": s[1], "dependencies": s[2]}
        for s in steps
    ]
    return json.dumps({"steps": items})


def verdict(achieved: bool, confidence: float, answer: str = "", reasoning: str = "") -> str:
    return json.dumps(
        {
            "achieved": achieved,
            "confidence": confidence,
            "final_answer": answer,
            "reasoning": reasoning,
        }
    )


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}
