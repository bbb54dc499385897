"""Every event's channel and payload exactly as DESIGN.md section 4 documents them."""

from __future__ import annotations

from typing import Any

import pytest

from engine.events import (
    AgentEvent,
    AnswerDelta,
    AnswerDone,
    AnswerSignal,
    AnswerStart,
    Compact,
    Done,
    ErrorEvent,
    Inject,
    IterationDone,
    IterationStart,
    Phase,
    ThinkingDone,
    ThinkingStart,
    event_from_dict,
)

CASES: list[tuple[AgentEvent, str, dict[str, Any]]] = [
    (ThinkingStart(2), "step", {"type": "thinking", "status": "start", "iteration": 2}),
    (
        ThinkingDone(2, "because"),
        "step",
        {"type": "thinking", "status": "done", "iteration": 2, "reasoning": "because"},
    ),
    (
        IterationStart(3, "search", {"q": "x"}),
        "step",
        {
            "type": "iteration",
            "status": "start",
            "iteration": 3,
            "tool_name": "search",
            "tool_args": {"q": "x"},
        },
    ),
    (
        IterationDone(3, "search", "found", None, 0.123456),
        "step",
        {
            "type": "iteration",
            "status": "done",
            "iteration": 3,
            "tool_name": "search",
            "observation": "found",
            "error": None,
            "iter_elapsed": 0.1235,
        },
    ),
    (AnswerSignal(), "step", {"type": "answer", "status": "start"}),
    (AnswerStart(), "answer", {"status": "start"}),
    (AnswerDelta("Hel"), "answer", {"status": "delta", "content": "Hel"}),
    (AnswerDone(), "answer", {"status": "done"}),
    (Compact(40, 6), "compact", {"original_messages": 40, "kept_messages": 6}),
    (
        Phase("selecting_tools", {"total_tools": 20}),
        "phase",
        {"phase": "selecting_tools", "total_tools": 20},
    ),
    (Inject("and in French"), "inject", {"type": "inject", "content": "and in French"}),
    (
        Done(
            "answer", 4, {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, 2.00004
        ),
        "done",
        {
            "status": "succeeded",
            "answer": "answer",
            "iterations": 4,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            "elapsed": 2.0,
        },
    ),
    (
        Done("cut", 1, {}, 1.0, "incomplete", "The answer reached its length limit."),
        "done",
        {
            "status": "incomplete",
            "answer": "cut",
            "iterations": 1,
            "usage": {},
            "elapsed": 1.0,
            "reason": "The answer reached its length limit.",
        },
    ),
    (ErrorEvent("boom"), "error", {"message": "boom", "status": "failed", "answer": ""}),
]


@pytest.mark.parametrize(("event", "channel", "payload"), CASES)
def test_payload_and_channel(event: AgentEvent, channel: str, payload: dict[str, Any]) -> None:
    assert event.channel == channel
    assert event.to_dict() == payload


@pytest.mark.parametrize(("event", "channel", "payload"), CASES)
def test_round_trip_through_stored_dicts(
    event: AgentEvent, channel: str, payload: dict[str, Any]
) -> None:
    rebuilt = event_from_dict(channel, payload)
    assert type(rebuilt) is type(event)
    assert rebuilt.to_dict() == payload


def test_iteration_done_with_an_error() -> None:
    event = IterationDone(1, "calc", "Error: division by zero", "division by zero", 0.5)
    assert event.to_dict()["error"] == "division by zero"


def test_unknown_channel_is_rejected() -> None:
    with pytest.raises(ValueError):
        event_from_dict("nope", {})
