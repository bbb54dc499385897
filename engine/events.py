"""The event protocol of DESIGN.md section 4 as typed dataclasses.

Each event knows its ``channel`` and produces exactly the documented payload with
``to_dict()``. The web layer stores and forwards these dicts untouched, so the SSE API,
the event log and the websocket renderer all speak one schema.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "AgentEvent",
    "AnswerDelta",
    "AnswerDone",
    "AnswerReset",
    "AnswerSignal",
    "AnswerStart",
    "Compact",
    "Done",
    "ErrorEvent",
    "Inject",
    "IterationDone",
    "IterationStart",
    "Phase",
    "StepProgress",
    "ThinkingDone",
    "ThinkingStart",
    "ThoughtDelta",
    "EventCallback",
    "emit",
    "event_from_dict",
]

logger = logging.getLogger(__name__)


class AgentEvent:
    channel: ClassVar[str]

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError


EventCallback = Callable[[AgentEvent], Any]


async def emit(on_event: EventCallback | None, event: AgentEvent) -> None:
    """Deliver an event to a sync or async callback; a failing callback is logged and
    never stops the work that emitted it."""
    if on_event is None:
        return
    try:
        outcome = on_event(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.exception("on_event callback failed for %s", type(event).__name__)


@dataclass
class ThinkingStart(AgentEvent):
    iteration: int
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "thinking", "status": "start", "iteration": self.iteration}


@dataclass
class ThoughtDelta(AgentEvent):
    """Text of a step's thought as it streams: the model's reasoning channel, a JSON
    action's ``reasoning``, or text that turned out not to be the answer."""

    iteration: int
    content: str
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "thinking",
            "status": "delta",
            "iteration": self.iteration,
            "content": self.content,
        }


@dataclass
class ThinkingDone(AgentEvent):
    """The step's whole thought (empty: none, or only what streamed as the answer)."""

    iteration: int
    reasoning: str
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "thinking",
            "status": "done",
            "iteration": self.iteration,
            "reasoning": self.reasoning,
        }


@dataclass
class IterationStart(AgentEvent):
    iteration: int
    tool_name: str
    tool_args: dict[str, Any]
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "iteration",
            "status": "start",
            "iteration": self.iteration,
            "tool_name": self.tool_name,
            "tool_args": self.tool_args,
        }


@dataclass
class IterationDone(AgentEvent):
    iteration: int
    tool_name: str
    observation: str
    error: str | None
    iter_elapsed: float
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "iteration",
            "status": "done",
            "iteration": self.iteration,
            "tool_name": self.tool_name,
            "observation": self.observation,
            "error": self.error,
            "iter_elapsed": round(self.iter_elapsed, 4),
        }


@dataclass
class Approval(AgentEvent):
    """A tool call waiting for the user's approval (``requested``), then the decision
    (``approved``, ``denied`` or ``expired``)."""

    status: str
    call_id: str
    tool_name: str = ""
    tool_args: dict[str, Any] | None = None
    reason: str = ""
    # What the call would send (engine.approval.ApprovalRequest.request); {} if unknown.
    request: dict[str, Any] | None = None
    channel: ClassVar[str] = "approval"

    def to_dict(self) -> dict[str, Any]:
        if self.status == "requested":
            payload = {
                "status": self.status,
                "call_id": self.call_id,
                "tool_name": self.tool_name,
                "tool_args": self.tool_args or {},
                "reason": self.reason,
            }
            if self.request:
                payload["request"] = self.request
            return payload
        return {"status": self.status, "call_id": self.call_id}


@dataclass
class AnswerSignal(AgentEvent):
    channel: ClassVar[str] = "step"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "answer", "status": "start"}


@dataclass
class AnswerStart(AgentEvent):
    channel: ClassVar[str] = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"status": "start"}


@dataclass
class AnswerDelta(AgentEvent):
    content: str
    channel: ClassVar[str] = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"status": "delta", "content": self.content}


@dataclass
class AnswerReset(AgentEvent):
    """The text streamed since the last ``AnswerStart`` was not the answer (the step went
    on to call tools, or a follow-up came first): readers empty the answer; the step's
    ``ThinkingDone`` carries that text as its thought."""

    channel: ClassVar[str] = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"status": "reset"}


@dataclass
class AnswerDone(AgentEvent):
    channel: ClassVar[str] = "answer"

    def to_dict(self) -> dict[str, Any]:
        return {"status": "done"}


@dataclass
class Compact(AgentEvent):
    original_messages: int
    kept_messages: int
    channel: ClassVar[str] = "compact"

    def to_dict(self) -> dict[str, Any]:
        return {"original_messages": self.original_messages, "kept_messages": self.kept_messages}


@dataclass
class Phase(AgentEvent):
    phase: str
    extra: dict[str, Any] = field(default_factory=dict)
    channel: ClassVar[str] = "phase"

    def to_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, **self.extra}


@dataclass
class StepProgress(AgentEvent):
    """How one step of a plan is doing (plan mode), so the page can show every step live.

    ``event`` is ``started``, ``iteration``, ``tool``, ``completed``, ``failed`` or
    ``skipped``; ``extra`` holds that event's own fields (``iteration``; a tool's
    ``status``, ``tool_name``, ``tool_args``, ``observation``, ``error``, ``iter_elapsed``;
    ``result`` and ``iterations``; ``error``; ``reason``). ``elapsed`` is seconds since
    the step started, ``tokens`` the step's tokens so far, ``round`` the plan's round.
    """

    step_id: str
    event: str
    task: str
    model: str
    elapsed: float
    tokens: int
    round: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    channel: ClassVar[str] = "step_progress"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step_id": self.step_id,
            "event": self.event,
            "task": self.task,
            "model": self.model,
            "elapsed": round(self.elapsed, 4),
            "tokens": self.tokens,
            "round": self.round,
            **self.extra,
        }


_STEP_PROGRESS_FIELDS = ("step_id", "event", "task", "model", "elapsed", "tokens", "round")


@dataclass
class Inject(AgentEvent):
    content: str
    channel: ClassVar[str] = "inject"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "inject", "content": self.content}


@dataclass
class Done(AgentEvent):
    answer: str
    iterations: int
    usage: dict[str, int]
    elapsed: float
    # "incomplete" when the answer is cut short (its stream broke off, or it reached its
    # length limit), with the reason in plain words.
    status: str = "succeeded"
    reason: str = ""
    channel: ClassVar[str] = "done"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "status": self.status,
            "answer": self.answer,
            "iterations": self.iterations,
            "usage": self.usage,
            "elapsed": round(self.elapsed, 4),
        }
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class ErrorEvent(AgentEvent):
    """Not emitted by the loop itself: the web layer's report of a run that ended without
    a complete answer. ``answer`` is the partial answer kept (what a reload shows), which
    supersedes what a client assembled from the deltas: some of those may never have
    reached the log before a crash."""

    message: str
    status: str = "failed"
    answer: str = ""
    retryable: bool = True  # False: a Retry cannot help (the API key, the quota, ...)
    channel: ClassVar[str] = "error"

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "message": self.message,
            "status": self.status,
            "answer": self.answer,
        }
        if not self.retryable:
            payload["retryable"] = False
        return payload


def event_from_dict(channel: str, payload: dict[str, Any]) -> AgentEvent:
    """Rebuild a typed event from a stored (channel, payload) pair."""
    kind, status = payload.get("type"), payload.get("status")
    if channel == "step":
        if kind == "thinking":
            if status == "start":
                return ThinkingStart(payload["iteration"])
            if status == "delta":
                return ThoughtDelta(payload["iteration"], payload.get("content", ""))
            return ThinkingDone(payload["iteration"], payload.get("reasoning", ""))
        if kind == "iteration":
            if status == "start":
                return IterationStart(
                    payload["iteration"], payload["tool_name"], payload.get("tool_args", {})
                )
            return IterationDone(
                payload["iteration"],
                payload["tool_name"],
                payload.get("observation", ""),
                payload.get("error"),
                payload.get("iter_elapsed", 0.0),
            )
        if kind == "answer":
            return AnswerSignal()
    if channel == "answer":
        if status == "start":
            return AnswerStart()
        if status == "delta":
            return AnswerDelta(payload.get("content", ""))
        if status == "reset":
            return AnswerReset()
        return AnswerDone()
    if channel == "compact":
        return Compact(payload["original_messages"], payload["kept_messages"])
    if channel == "phase":
        extra = {k: v for k, v in payload.items() if k != "phase"}
        return Phase(payload["phase"], extra)
    if channel == "inject":
        return Inject(payload.get("content", ""))
    if channel == "step_progress":
        return StepProgress(
            str(payload.get("step_id", "")),
            payload.get("event", ""),
            payload.get("task", ""),
            payload.get("model", ""),
            payload.get("elapsed", 0.0),
            payload.get("tokens", 0),
            payload.get("round", 1),
            {k: v for k, v in payload.items() if k not in _STEP_PROGRESS_FIELDS},
        )
    if channel == "approval":
        return Approval(
            payload["status"],
            payload["call_id"],
            payload.get("tool_name", ""),
            payload.get("tool_args"),
            payload.get("reason", ""),
            payload.get("request"),
        )
    if channel == "done":
        return Done(
            payload.get("answer", ""),
            payload.get("iterations", 0),
            payload.get("usage", {}),
            payload.get("elapsed", 0.0),
            payload.get("status", "succeeded"),
            payload.get("reason", ""),
        )
    if channel == "error":
        return ErrorEvent(
            payload.get("message", ""),
            payload.get("status", "failed"),
            payload.get("answer", ""),
            payload.get("retryable", True) is not False,
        )
    raise ValueError(f"unknown event channel/payload: {channel!r} {payload!r}")
