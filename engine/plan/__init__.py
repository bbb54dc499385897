"""Plan (DAG) mode: a planner splits the goal into steps with dependencies, an executor
runs each step with its own agent (independent steps in parallel), an analyzer checks the
results against the goal (replanning while needed), and one streamed call answers.

:func:`choose_mode` is Auto mode's router between this and a plain ReAct run.
"""

from __future__ import annotations

from engine.plan.agent import PlanAgent
from engine.plan.analyzer import Analysis, analyze
from engine.plan.config import PlanConfig
from engine.plan.executor import PlanExecutor
from engine.plan.model import Plan, PlanError, PlanStep, parse_plan, validate_plan
from engine.plan.results import ExecutionReport, StepResult
from engine.plan.router import choose_mode

__all__ = [
    "Analysis",
    "ExecutionReport",
    "Plan",
    "PlanAgent",
    "PlanConfig",
    "PlanError",
    "PlanExecutor",
    "PlanStep",
    "StepResult",
    "analyze",
    "choose_mode",
    "parse_plan",
    "validate_plan",
]
