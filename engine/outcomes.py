"""What a run of the loop produces: its steps, its result and the result's statuses.

Kept apart from :mod:`engine.agent` so the phases it calls (:mod:`engine.answer`,
:mod:`engine.prompts`) can name them without importing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.messages import ChatMessage, Usage
from engine.tools import Artifact

__all__ = [
    "CANCELLED",
    "FAILED",
    "INCOMPLETE",
    "PAUSED",
    "SUCCEEDED",
    "AgentResult",
    "ContextGuardLike",
    "Step",
]

# The values of ``AgentResult.status``.
SUCCEEDED = "succeeded"
CANCELLED = "cancelled"
# The answer was cut short: its stream broke off midway, or it reached its length limit.
INCOMPLETE = "incomplete"
# A guard stopped the loop (repeated errors, no progress); the answer explains why.
PAUSED = "paused"
FAILED = "failed"


class ContextGuardLike(Protocol):
    """What the loop needs from :class:`engine.context.ContextGuard`."""

    budget_tokens: int

    async def check_and_compact(
        self,
        messages: list[ChatMessage],
        *,
        hint: str = "react_iteration",
        budget_tokens: int | None = None,
    ) -> list[ChatMessage]: ...


@dataclass
class Step:
    """One tool call and how it ended; ``error`` is None on success."""

    iteration: int
    tool_name: str
    tool_args: dict[str, Any]
    observation: str
    error: str | None = None
    elapsed: float = 0.0
    artifacts: list[Artifact] = field(default_factory=list)
    tool_call_id: str | None = None


@dataclass
class AgentResult:
    """The outcome of :meth:`ReActAgent.run`.

    ``answer`` is the loop's answer (or the guard's explanation when paused);
    ``answer_streamed`` tells whether readers already hold it (its deltas went out while
    the loop ran); ``history`` is the conversation the run was given. ``stop_reason`` says
    why the loop ended: ``answer``, ``max_iterations``, ``repeated_error``,
    ``no_progress``, ``cancelled``, ``llm_error``, ``length`` or ``stream_broken``.
    ``trace`` is the run's part of ``messages``: its question and everything after it
    (the tool calls and results as the model last saw them); a paused run goes on from
    it (``run(note, history, resume=result.trace)``).
    """

    answer: str
    messages: list[ChatMessage]
    steps: list[Step]
    iterations: int
    usage: Usage
    elapsed: float
    status: str = SUCCEEDED
    pending_injections: list[str] = field(default_factory=list)
    error: str | None = None
    stop_reason: str = "answer"
    answer_streamed: bool = False
    history: list[ChatMessage] = field(default_factory=list)
    trace: list[ChatMessage] = field(default_factory=list)
