"""Live frames of a run: what the browser receives for each event."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.urls import reverse

from conversations.pages.items import PARTIALS
from conversations.pages.rendering import RunView, build_run_view, render_run_block


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


def thought(status: str, iteration: int, **fields: str) -> dict:
    return {"type": "thinking", "status": status, "iteration": iteration, **fields}


def test_a_streaming_thought_grows_in_place_then_shows_whole_and_collapsed() -> None:
    view = RunView(run_id=3)
    opened = view.apply(1, "step", thought("delta", 1, content="Weighing <options>"))
    grown = view.apply(2, "step", thought("delta", 1, content=", then more"))
    done = view.apply(3, "step", thought("done", 1, reasoning="Weighing <options>, then more."))

    assert 'hx-swap-oob="beforeend:#steps-3"' in opened and "Thinking…" in opened
    assert "&lt;options&gt;" in opened and "<options>" not in opened
    item_id = view.items[0].dom_id
    assert grown == f'<span hx-swap-oob="beforeend:#{item_id}-text">, then more</span>'
    assert f'<details id="{item_id}" class="thinking" hx-swap-oob="true">' in done
    assert "Thinking…" not in done and " open" not in done
    assert len(view.items) == 1 and view.items[0].text == "Weighing <options>, then more."


def test_text_taken_back_from_the_answer_empties_it_and_becomes_the_thought() -> None:
    view = RunView(run_id=4)
    view.apply(1, "answer", {"status": "start"})
    view.apply(2, "answer", {"status": "delta", "content": "Let me check."})
    reset = view.apply(3, "answer", {"status": "reset"})
    view.apply(4, "step", thought("done", 1, reasoning="Let me check."))

    assert view.answer_text == "" and 'id="answer-4"' in reset and "Let me check." not in reset
    assert [(i.kind, i.text) for i in view.items] == [("thought", "Let me check.")]


def test_a_replayed_run_equals_the_live_one() -> None:
    """A page load or reconnect (replay without frames) shows what the live frames built."""
    events = [
        ("step", thought("start", 1)),
        ("step", thought("delta", 1, content="Hmm")),
        ("answer", {"status": "start"}),
        ("answer", {"status": "delta", "content": "Let me"}),
        ("answer", {"status": "reset"}),
        ("step", thought("done", 1, reasoning="Hmm\n\nLet me")),
        ("step", {"type": "iteration", "status": "start", "iteration": 1, "tool_name": "t"}),
        ("step", {"type": "iteration", "status": "done", "iteration": 1, "tool_name": "t"}),
        ("step", thought("start", 2)),
        ("answer", {"status": "start"}),
        ("answer", {"status": "delta", "content": "**Done**"}),
        ("step", thought("done", 2, reasoning="")),
        ("answer", {"status": "done"}),
    ]
    live = RunView(run_id=9)
    for seq, (channel, payload) in enumerate(events, start=1):
        live.apply(seq, channel, payload)
    replayed = build_run_view(9, [(s, c, p) for s, (c, p) in enumerate(events, start=1)], [])

    assert replayed.answer_text == live.answer_text == "**Done**"
    assert [(i.kind, i.text, i.extra) for i in replayed.items] == [
        (i.kind, i.text, i.extra) for i in live.items
    ]
    assert render_run_block(replayed, None) == render_run_block(live, None)
