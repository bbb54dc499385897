"""Live frames of a run: what the browser receives for each event."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.urls import reverse

from conversations.rendering import PARTIALS, RunView


def rendered_status(run_id: int, text: str) -> str:
    """The run-status partial rendered by the template engine, the reference."""
    view = RunView(run_id=run_id, status_text=text)
    return render_to_string(f"{PARTIALS}#run-status", {"view": view, "oob": True})


STATUS_EVENTS = [
    ("step", {"type": "thinking", "status": "start", "iteration": 1}, "Thinking (step 1)…"),
    (
        "phase",
        {"phase": "selecting_tools", "total_tools": 13},
        "Choosing the right tools among 13…",
    ),
    ("phase", {"phase": "<script>alert(1)</script> & co"}, "<script>alert(1)</script> & co…"),
    ("step", {"type": "answer", "status": "start"}, "Writing the answer…"),
]


def test_each_status_frame_is_the_template_for_that_status() -> None:
    view = RunView(run_id=7)
    stop_url = reverse("run_cancel", args=[7])
    for seq, (channel, payload, text) in enumerate(STATUS_EVENTS, start=1):
        frame = view.apply(seq, channel, payload)
        assert frame == rendered_status(7, text)
        assert "<script>" not in frame
        assert f'hx-post="{stop_url}"' in frame


def test_after_the_run_failed_its_status_has_no_spinner_or_stop() -> None:
    view = RunView(run_id=5)
    view.apply(1, "step", {"type": "thinking", "status": "start", "iteration": 1})
    frame = view.apply(2, "error", {"message": "The model is unreachable.", "status": "failed"})
    assert "The model is unreachable." in frame
    assert "spinner" not in frame and "Stop" not in frame


def test_answer_deltas_are_escaped_and_appended_to_the_answer() -> None:
    view = RunView(run_id=11)
    first = view.apply(1, "answer", {"status": "delta", "content": "<b>bold</b> "})
    second = view.apply(2, "answer", {"status": "delta", "content": "& more"})
    assert first == ('<span hx-swap-oob="beforeend:#answer-src-11">&lt;b&gt;bold&lt;/b&gt; </span>')
    assert second == '<span hx-swap-oob="beforeend:#answer-src-11">&amp; more</span>'
    assert view.answer_text == "<b>bold</b> & more"
