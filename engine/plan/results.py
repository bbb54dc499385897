"""What running a plan produced: one :class:`StepResult` per step, one report per round."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.agent import Step
from engine.messages import Usage
from engine.plan.model import Plan, PlanStep

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "FAILED",
    "SKIPPED",
    "ExecutionReport",
    "StepResult",
]

# StepResult.status
COMPLETED = "completed"
FAILED = "failed"
SKIPPED = "skipped"
CANCELLED = "cancelled"


@dataclass
class StepResult:
    """How one step ended. ``result`` is the step agent's answer (completed steps);
    ``error`` says why a step failed or was skipped; ``tool_steps`` are its tool calls."""

    step: PlanStep
    status: str
    result: str = ""
    error: str | None = None
    model: str = ""
    iterations: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_steps: list[Step] = field(default_factory=list)
    elapsed: float = 0.0

    @property
    def completed(self) -> bool:
        return self.status == COMPLETED


@dataclass
class ExecutionReport:
    """One round: its plan, every step's result in plan order, and the follow-ups the
    user sent while it ran (they ended the round early: unstarted steps were skipped)."""

    round: int
    plan: Plan
    results: list[StepResult] = field(default_factory=list)
    followups: list[str] = field(default_factory=list)

    def result(self, step_id: str) -> StepResult | None:
        return next((r for r in self.results if r.step.id == step_id), None)

    @property
    def usage(self) -> Usage:
        total = Usage()
        for result in self.results:
            total = total + result.usage
        return total

    @property
    def iterations(self) -> int:
        return sum(r.iterations for r in self.results)

    @property
    def tool_steps(self) -> list[Step]:
        return [step for r in self.results for step in r.tool_steps]
