"""Live frames of a run: what the browser receives for each event."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.urls import reverse

from conversations.pages.items import PARTIALS, StepItem
from conversations.pages.rendering import (
    COMPOSER_RUN,
    RunView,
    build_run_view,
    render_run_block,
)


def rendered_status(run_id: int, text: str) -> str:
    """The run-status partial rendered by the template engine, the reference; with the
    composer's state (its Stop and status line), which every status frame carries."""
    view = RunView(run_id=run_id, status_text=text)
    html = render_to_string(f"{PARTIALS}#run-status", {"view": view, "oob": True})
    return html + render_to_string(COMPOSER_RUN, {"view": view})


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
        assert 'id="composer-stop"' in frame and 'data-state="running"' in frame


def test_after_the_run_failed_its_status_has_no_spinner_or_stop() -> None:
    view = RunView(run_id=5)
    view.apply(1, "step", {"type": "thinking", "status": "start", "iteration": 1})
    frame = view.apply(2, "error", {"message": "The model is unreachable.", "status": "failed"})
    assert "The model is unreachable." in frame
    assert "spinner" not in frame and "Stop" not in frame
    # The composer's Stop and status line go: Send is back.
    assert '<span id="composer-stop" class="composer-stop" data-run="5" data-state="idle"' in frame
    assert 'id="composer-status"' in frame and 'data-state="running"' not in frame


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


def composer_part(frame: str, part: str) -> str:
    """The composer's ``part`` ("status" or "stop") in a frame ("" if absent)."""
    start = frame.find(f'id="composer-{part}"')
    end = "</div>" if part == "status" else "</span>"  # the status holds spans, Stop none
    return "" if start < 0 else frame[frame.rfind("<", 0, start) :].split(end, 1)[0]


def test_the_composer_says_what_the_run_does_and_follows_the_run_answering_follow_ups() -> None:
    view = RunView(run_id=8)
    approval = {"status": "requested", "call_id": "c1", "tool_name": "http_request"}
    frame = view.apply(1, "approval", approval)
    assert "Waiting for your approval of http_request…" in composer_part(frame, "status")
    assert 'data-run="8" data-state="running"' in composer_part(frame, "stop")

    followup = {"run_id": 9, "messages": [{"id": 4, "content": "and more"}]}
    view.apply(2, "done", {"iterations": 1})
    frame = view.apply(3, "followup", followup)
    # The run answering the follow-up works now: the composer's Stop is its.
    assert 'data-run="9" data-state="running"' in composer_part(frame, "status")
    assert reverse("run_cancel", args=[9]) in composer_part(frame, "stop")


def test_a_follow_up_waits_below_the_answer_and_moves_into_the_steps_once_read() -> None:
    class Pending:
        as_inject_item = StepItem(kind="inject", text="and <more>", dom_id="inject-4")

    view = RunView(run_id=6, inject_ids=[4])
    view.apply(1, "answer", {"status": "start"})
    block = render_run_block(view, None, pending_injects=[Pending()])
    assert block.index('id="answer-6"') < block.index('id="followups-6"')
    assert block.index('id="followups-6"') < block.index('id="inject-4"')
    assert "the agent will answer it after this answer" in block  # shown by composer.css

    frame = RunView(run_id=6, inject_ids=[4]).apply(2, "inject", {"content": "and <more>"})
    assert frame.startswith('<div id="inject-4" hx-swap-oob="delete"></div>')
    assert 'hx-swap-oob="beforeend:#steps-6"' in frame and "delivered to the agent" in frame
    assert "and &lt;more&gt;" in frame
