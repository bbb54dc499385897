"""The step_progress event: channel, exact payload, and rebuilding it from storage."""

from __future__ import annotations

from engine.events import StepProgress, event_from_dict


def test_step_progress_payload_is_the_documented_one() -> None:
    event = StepProgress(
        "s1",
        "tool",
        "Find Oslo",
        "fast-model",
        1.234567,
        42,
        2,
        {"status": "start", "iteration": 1, "tool_name": "search", "tool_args": {"q": "x"}},
    )

    assert event.channel == "step_progress"
    assert event.to_dict() == {
        "step_id": "s1",
        "event": "tool",
        "task": "Find Oslo",
        "model": "fast-model",
        "elapsed": 1.2346,
        "tokens": 42,
        "round": 2,
        "status": "start",
        "iteration": 1,
        "tool_name": "search",
        "tool_args": {"q": "x"},
    }


def test_step_progress_is_rebuilt_from_its_stored_payload() -> None:
    payload = StepProgress("s2", "skipped", "t", "main", 0.0, 0, 1, {"reason": "why"}).to_dict()

    rebuilt = event_from_dict("step_progress", payload)

    assert isinstance(rebuilt, StepProgress)
    assert rebuilt.extra == {"reason": "why"} and rebuilt.to_dict() == payload
