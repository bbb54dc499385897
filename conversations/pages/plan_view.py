"""Plan mode on the page: the plan of each round, its steps as they run, the verdict.

Part of :mod:`conversations.pages.rendering`: a :class:`PlanTracker` belongs to a run's
``RunView`` and turns the ``phase`` events of plan mode and the ``step_progress`` events
into state and HTML frames. A step's row is rendered whole on each of its events (a step
has a handful), addressed by a DOM id from its position in the plan, never from the id
the model chose (any string).
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop

from conversations.pages.items import StepItem, ToolCard, partial

RESULT_PREVIEW_CHARS = 600

# In English; the status line shows their translation.
PHASE_TEXT = {
    "planning": gettext_noop("Planning the steps…"),
    "executing": gettext_noop("Running the plan…"),
    "analyzing": gettext_noop("Checking the results against the goal…"),
    "replanning": gettext_noop("Not there yet: planning again…"),
    "planning_failed": gettext_noop("No plan could be made: working step by step instead…"),
}
STEP_STATUS = {"started": "running", "completed": "done", "failed": "failed", "skipped": "skipped"}


class RunViewLike(Protocol):
    """What the tracker uses of the ``RunView`` it belongs to (rendering imports this
    module, so the view is named by its shape)."""

    items: list[StepItem]

    def append_item(self, item: StepItem, render: bool) -> str: ...

    def set_status(self, text: str, render: bool) -> str: ...


@dataclass
class PlanStepView:
    dom_id: str
    step_id: str
    task: str
    dependencies: list[str]
    depth: int
    model: str = ""
    status: str = "waiting"  # waiting | running | done | failed | skipped
    elapsed: float | None = None
    tokens: int = 0
    iteration: int = 0
    result: str = ""
    error: str = ""
    cards: list[ToolCard] = field(default_factory=list)
    open_cards: dict[str, deque[ToolCard]] = field(default_factory=lambda: defaultdict(deque))

    @property
    def indent(self) -> int:
        """The depth as the page indents it (deeper chains stop moving right)."""
        return min(self.depth, 3)

    @property
    def result_preview(self) -> str:
        return self.result[:RESULT_PREVIEW_CHARS]

    @property
    def result_truncated(self) -> bool:
        return len(self.result) > RESULT_PREVIEW_CHARS


@dataclass
class PlanRound:
    number: int
    dom_id: str
    steps: list[PlanStepView]
    reason: str = ""  # why this round replans
    verdict: dict[str, Any] | None = None

    def step(self, step_id: str) -> PlanStepView | None:
        return next((s for s in self.steps if s.step_id == step_id), None)


def _depths(steps: list[dict[str, Any]]) -> dict[str, int]:
    """How deep each step sits below the steps it waits for (0: starts at once)."""
    deps = {str(s.get("id")): [str(d) for d in s.get("dependencies") or ()] for s in steps}
    depth: dict[str, int] = {}

    def of(step_id: str, seen: frozenset[str] = frozenset()) -> int:
        if step_id in depth:
            return depth[step_id]
        known = [d for d in deps.get(step_id, ()) if d in deps and d not in seen]
        depth[step_id] = 1 + max((of(d, seen | {step_id}) for d in known), default=-1)
        return depth[step_id]

    for step_id in deps:
        of(step_id)
    return depth


@dataclass
class PlanTracker:
    """The plan rounds of one run (empty for a ReAct run)."""

    run_id: int
    rounds: dict[int, PlanRound] = field(default_factory=dict)
    mode: str = ""  # what Auto chose, when it chose
    _pending_reason: str = ""
    _cards: int = 0

    def on_phase(self, view: RunViewLike, payload: dict[str, Any], render: bool) -> str | None:
        """A plan phase's frames; None when the phase is not plan mode's."""
        phase = payload.get("phase")
        if phase == "routed":
            self.mode = str(payload.get("mode", ""))
            return ""
        if phase not in PHASE_TEXT and phase != "analyzed":
            return None
        number = int(payload.get("round") or 1)
        if phase == "replanning":
            self._pending_reason = str(payload.get("reason") or "")
        if phase == "executing":
            steps = (payload.get("plan") or {}).get("steps") or []
            depths = _depths(steps)
            dom = f"plan-{self.run_id}-{number}"
            plan_round = PlanRound(
                number=number,
                dom_id=dom,
                reason=self._pending_reason,
                steps=[
                    PlanStepView(
                        dom_id=f"{dom}-{index}",
                        step_id=str(step.get("id")),
                        task=str(step.get("task") or ""),
                        dependencies=[str(d) for d in step.get("dependencies") or ()],
                        depth=depths.get(str(step.get("id")), 0),
                    )
                    for index, step in enumerate(steps)
                ],
            )
            self._pending_reason = ""
            self.rounds[number] = plan_round
            item = StepItem(kind="plan", dom_id=dom, extra={"round": plan_round})
            view.items.append(item)
            return view.append_item(item, render) + view.set_status(_(PHASE_TEXT[phase]), render)
        if phase == "analyzed":
            plan_round = self.rounds.get(number)
            if plan_round is None:
                return ""
            plan_round.verdict = {
                "achieved": bool(payload.get("achieved")),
                "confidence": float(payload.get("confidence") or 0),
                "reasoning": str(payload.get("reasoning") or ""),
            }
            return partial("plan-verdict", {"round": plan_round, "oob": True}) if render else ""
        return view.set_status(_(PHASE_TEXT[phase]), render)

    def on_progress(self, view: RunViewLike, payload: dict[str, Any], render: bool) -> str:
        plan_round = self.rounds.get(int(payload.get("round") or 1))
        step = plan_round.step(str(payload.get("step_id"))) if plan_round else None
        if step is None:
            return ""
        event = payload.get("event")
        step.model = str(payload.get("model") or step.model)
        if payload.get("elapsed") is not None:
            step.elapsed = float(payload["elapsed"])
        step.tokens = int(payload.get("tokens") or step.tokens)
        if event in STEP_STATUS:
            step.status = STEP_STATUS[event]
        if event == "iteration":
            step.iteration = int(payload.get("iteration") or step.iteration)
        elif event == "completed":
            step.result = str(payload.get("result") or "")
        elif event in ("failed", "skipped"):
            step.error = str(payload.get("error") or payload.get("reason") or "")
        elif event == "tool" and payload.get("status") == "start":
            self._cards += 1
            card = ToolCard(
                dom_id=f"card-{self.run_id}-p{self._cards}",
                iteration=int(payload.get("iteration") or step.iteration),
                tool_name=str(payload.get("tool_name") or ""),
                tool_args=payload.get("tool_args") or {},
            )
            step.cards.append(card)
            step.open_cards[card.tool_name].append(card)
        elif event == "tool":
            queue = step.open_cards.get(str(payload.get("tool_name") or ""))
            if queue:
                card = queue.popleft()
                card.observation = str(payload.get("observation") or "")
                card.error = payload.get("error")
                card.elapsed = payload.get("iter_elapsed")
                card.done = True
                card.waiting = False
        return partial("plan-step", {"step": step, "oob": True}) if render else ""

    def open_cards(self) -> list[ToolCard]:
        """The tool cards of calls the steps have started and not yet finished."""
        return [
            card
            for plan_round in self.rounds.values()
            for step in plan_round.steps
            for cards in step.open_cards.values()
            for card in cards
        ]

    def step_of(self, card: ToolCard) -> PlanStepView | None:
        """The step a tool card belongs to (None for a card of the run's own loop)."""
        return next(
            (
                step
                for plan_round in self.rounds.values()
                for step in plan_round.steps
                if any(mine is card for mine in step.cards)
            ),
            None,
        )

    def close(self) -> list[PlanStepView]:
        """The run ended: steps still waiting or running never will; those steps."""
        unfinished = [
            step
            for plan_round in self.rounds.values()
            for step in plan_round.steps
            if step.status in ("waiting", "running")
        ]
        for step in unfinished:
            step.status = "skipped" if step.status == "waiting" else "stopped"
            for cards in step.open_cards.values():
                for card in cards:
                    card.done, card.error = True, card.error or _("[interrupted]")
            step.open_cards.clear()
        return unfinished
