"""Plan mode on the page: the plan, its steps updating in place, the verdict, a replan."""

from __future__ import annotations

import re

from conversations.pages.rendering import RunView, build_run_view, render_run_block

PLAN = {
    "steps": [
        {"id": "tokyo", "task": "Weather in Tokyo", "dependencies": []},
        {"id": "paris", "task": "Weather in Paris", "dependencies": []},
        {"id": "compare", "task": "Compare <both>", "dependencies": ["tokyo", "paris"]},
    ]
}


def progress(step_id: str, event: str, round_: int = 1, **fields) -> tuple[str, dict]:
    payload = {"step_id": step_id, "event": event, "round": round_, "model": "fast-model"}
    return "step_progress", payload | fields


EVENTS = [
    ("phase", {"phase": "planning", "round": 1}),
    ("phase", {"phase": "executing", "round": 1, "plan": PLAN}),
    progress("tokyo", "started", elapsed=0, tokens=0),
    progress("paris", "started", elapsed=0, tokens=0),
    progress("tokyo", "tool", status="start", tool_name="weather", tool_args={"city": "Tokyo"}),
    progress(
        "tokyo",
        "tool",
        status="done",
        tool_name="weather",
        observation="18 °C",
        error=None,
        iter_elapsed=0.2,
    ),  # fmt: skip
    progress("tokyo", "completed", result="Tokyo: 18 °C", elapsed=1.5, tokens=120),
    progress("paris", "failed", error="The weather service timed out.", elapsed=2.0, tokens=80),
    progress("compare", "failed", error="dependency paris failed", elapsed=0, tokens=0),
    ("phase", {"phase": "analyzing", "round": 1}),
    (
        "phase",
        {
            "phase": "analyzed",
            "round": 1,
            "achieved": False,
            "confidence": 0.3,
            "reasoning": "Paris is missing.",
        },
    ),  # fmt: skip
    ("phase", {"phase": "replanning", "round": 2, "reason": "Paris is missing."}),
    (
        "phase",
        {
            "phase": "executing",
            "round": 2,
            "plan": {
                "steps": [{"id": "paris", "task": "Weather in Paris, again", "dependencies": []}]
            },
        },
    ),  # fmt: skip
    progress("paris", "started", round_=2),
]


def replayed(events) -> RunView:
    return build_run_view(9, [(seq, c, p) for seq, (c, p) in enumerate(events, start=1)], [])


def step_html(html: str, dom_id: str) -> str:
    match = re.search(rf'<li id="{dom_id}".*?</li>', html, re.S)
    assert match, f"{dom_id} is not on the page"
    return match.group(0)


def test_the_plan_shows_steps_below_the_ones_they_wait_for_with_status_model_and_result():
    html = render_run_block(replayed(EVENTS), run=None)

    tokyo = step_html(html, "plan-9-1-0")
    assert "done" in tokyo and "Weather in Tokyo" in tokyo and "fast-model" in tokyo
    assert "1.5 s" in tokyo and "120 tokens" in tokyo and "Tokyo: 18 °C" in tokyo
    assert "weather" in tokyo and "18 °C" in tokyo  # the step's tool card
    compare = step_html(html, "plan-9-1-2")
    assert "depth-1" in compare and "after tokyo, paris" in compare
    assert "Compare &lt;both&gt;" in compare and "<both>" not in compare
    assert "dependency paris failed" in step_html(html, "plan-9-1-2")
    assert "The weather service timed out." in step_html(html, "plan-9-1-1")
    assert "Goal not met yet" in html and "0.30" in html and "Paris is missing." in html
    # The second round, with why it was planned again.
    assert "Plan, round 2" in html and "Replanned: Paris is missing." in html
    assert "running" in step_html(html, "plan-9-2-0")


def test_live_frames_update_the_same_rows_the_page_renders():
    view = RunView(run_id=9)
    frames = [view.apply(seq, c, p) for seq, (c, p) in enumerate(EVENTS, start=1)]

    plan_frame = frames[1]
    assert 'id="plan-9-1"' in plan_frame and "beforeend:#steps-9" in plan_frame
    completed = frames[6]
    assert completed.startswith('<li id="plan-9-1-0"') and 'hx-swap-oob="true"' in completed
    assert "Tokyo: 18 °C" in completed
    verdict = frames[10]
    assert 'id="plan-9-1-verdict"' in verdict and "Goal not met yet" in verdict
    assert "Not there yet: planning again…" in frames[11]


def test_a_stop_mid_plan_leaves_no_step_spinning():
    stopped = [*EVENTS, ("error", {"message": "Stopped.", "status": "cancelled"})]
    view = RunView(run_id=9)
    frames = [view.apply(seq, c, p) for seq, (c, p) in enumerate(stopped, start=1)]

    assert 'id="plan-9-2-0"' in frames[-1] and "stopped" in frames[-1]
    html = render_run_block(replayed(stopped), run=None)
    assert "spinner" not in step_html(html, "plan-9-2-0")


def test_unknown_steps_and_rounds_are_ignored():
    view = RunView(run_id=9)
    assert view.apply(1, "step_progress", {"step_id": "x", "event": "started", "round": 4}) == ""
    view.apply(2, "phase", {"phase": "executing", "round": 1, "plan": PLAN})
    assert view.apply(3, *progress("nope", "completed", result="?")) == ""


def test_the_footer_of_a_plan_counts_its_steps_not_its_loop_turns():
    """Issue 47: a 4-step plan whose steps took two turns each said "8 steps"."""
    done = ("done", {"iterations": 8, "usage": {"total_tokens": 900}, "elapsed": 3.2})
    html = render_run_block(replayed([*EVENTS, done]), run=None)
    footer = re.search(r'<div id="footer-9".*?</div>', html, re.S).group(0)
    assert '<span class="iterations">4 plan steps</span>' in footer  # 3 in round 1, 1 in 2
    react = render_run_block(replayed([done]), run=None)
    assert '<span class="iterations">8 steps</span>' in react
