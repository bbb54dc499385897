"""The plan of plan mode: steps with dependencies, read tolerantly, then checked.

Models write plans in every shape: a bare list, one step instead of a list, ``steps``
encoded twice as a JSON string, ``depends_on: "1, 2"``, ids as numbers. :func:`parse_plan`
accepts the shapes seen in practice so a usable plan is never thrown away over its form;
:func:`validate_plan` then makes it runnable (or raises :class:`PlanError`).

Validation choices: a step with an empty task is dropped; a duplicate id is renamed
(``s1`` -> ``s1_2``) and references to that id mean its first holder; dependencies on
unknown ids or on the step itself are dropped; a cycle is rejected; a plan longer than
``max_steps`` is cut to its first ``max_steps`` steps in dependency order, so every kept
step keeps the steps it depends on (the analyzer and a replan can make up for the rest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from engine.errors import EngineError
from engine.structured import extract_json

__all__ = ["MODEL_HINTS", "Plan", "PlanError", "PlanStep", "parse_plan", "validate_plan"]

logger = logging.getLogger(__name__)

MODEL_HINTS = frozenset({"fast", "reasoning"})
DEFAULT_MAX_STEPS = 10

_LIST_KEYS = ("steps", "plan", "tasks", "subtasks")
_ID_KEYS = ("id", "step_id", "stepId", "step", "name", "key")
_TASK_KEYS = ("task", "description", "goal", "instruction", "instructions", "prompt", "query")
_DEP_KEYS = ("dependencies", "depends_on", "dependsOn", "deps", "dependency", "requires", "after")
_TOOL_KEYS = ("tool_hint", "toolHint", "tool", "tools")
_MODEL_KEYS = ("model_hint", "modelHint", "model")
_NONE_WORDS = frozenset({"", "none", "null", "nil", "n/a", "-", "no", "[]"})
_MAX_DEPTH = 4


class PlanError(EngineError, ValueError):
    """No usable plan: nothing step-like in the model's output, or a cycle."""


@dataclass
class PlanStep:
    """One unit of work, run by its own agent once its dependencies completed."""

    id: str
    task: str
    dependencies: list[str] = field(default_factory=list)
    tool_hint: str | None = None
    model_hint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "task": self.task,
            "dependencies": list(self.dependencies),
            "tool_hint": self.tool_hint,
            "model_hint": self.model_hint,
        }


@dataclass
class Plan:
    steps: list[PlanStep]

    def to_dict(self) -> dict[str, Any]:
        return {"steps": [step.to_dict() for step in self.steps]}

    def get(self, step_id: str) -> PlanStep | None:
        return next((step for step in self.steps if step.id == step_id), None)

    @property
    def ids(self) -> list[str]:
        return [step.id for step in self.steps]

    def __len__(self) -> int:
        return len(self.steps)


# --------------------------------------------------------------------------- parsing


def parse_plan(raw: Any) -> Plan:
    """A :class:`Plan` from whatever the model returned (dict, list, JSON text).

    Unknown ``model_hint`` values become None; missing ids become ``step<n>``. Steps are
    not checked here (see :func:`validate_plan`). Raises :class:`PlanError` when nothing
    step-like is found.
    """
    items = _step_items(raw, 0)
    steps = [step for n, item in enumerate(items, 1) if (step := _parse_step(item, n))]
    if not steps:
        raise PlanError("the plan has no usable step")
    return Plan(steps)


def _step_items(raw: Any, depth: int) -> list[Any]:
    if depth > _MAX_DEPTH:
        raise PlanError("the plan is nested too deeply")
    if isinstance(raw, str):
        return _step_items(_decode(raw), depth + 1)
    if isinstance(raw, list):
        return raw
    if not isinstance(raw, dict):
        raise PlanError(f"expected a plan object or list, got {type(raw).__name__}")
    for key in _LIST_KEYS:
        value = raw.get(key)
        if value is None:
            continue
        if isinstance(value, dict) and _looks_like_step(value):
            return [value]
        if isinstance(value, str) and value.strip()[:1] not in ("{", "["):
            if key in ("steps", "tasks", "subtasks"):
                raise PlanError(f"{key!r} is text, not a list of steps")
            continue  # "plan": "some prose", next to real steps
        return _step_items(value, depth + 1)
    if _looks_like_step(raw):
        return [raw]
    if raw and all(isinstance(v, dict) for v in raw.values()):
        # {"s1": {...}, "s2": {...}}: steps keyed by their id
        return [{"id": key, **value} for key, value in raw.items()]
    raise PlanError("no steps found in the plan")


def _decode(text: str) -> Any:
    text = text.strip()
    if not text:
        raise PlanError("the plan is empty")
    try:
        return extract_json(text)
    except ValueError as exc:
        raise PlanError(f"the plan is not JSON: {exc}") from None


def _looks_like_step(value: dict[str, Any]) -> bool:
    return any(key in value for key in _TASK_KEYS)


def _parse_step(item: Any, n: int) -> PlanStep | None:
    if isinstance(item, str):
        text = item.strip()
        if text.startswith("{"):
            with contextlib.suppress(ValueError):
                item = extract_json(text)
        if isinstance(item, str):
            return PlanStep(f"step{n}", text) if text else None
    if not isinstance(item, dict):
        return None
    step_id = _first(item, _ID_KEYS, _id_text) or f"step{n}"
    task = _first(item, _TASK_KEYS, _text) or ""
    dependencies = next((_deps(item[k]) for k in _DEP_KEYS if k in item), [])
    return PlanStep(
        id=step_id,
        task=task,
        dependencies=dependencies,
        tool_hint=_first(item, _TOOL_KEYS, _hint_text),
        model_hint=_model_hint(_first(item, _MODEL_KEYS, _hint_text)),
    )


def _first(item: dict[str, Any], keys: tuple[str, ...], convert: Any) -> Any:
    for key in keys:
        value = convert(item.get(key))
        if value:
            return value
    return None


def _id_text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value.strip() or None
    return None


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def _hint_text(value: Any) -> str | None:
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, str) and v.strip()), None)
    if not isinstance(value, str) or value.strip().lower() in _NONE_WORDS:
        return None
    return value.strip()


def _model_hint(value: str | None) -> str | None:
    hint = (value or "").strip().lower()
    return hint if hint in MODEL_HINTS else None


def _deps(value: Any) -> list[str]:
    """Dependency ids from a list, a single id, or text such as ``"s1, s2"``."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                text = text.strip("[]")
        if isinstance(value, str):
            if text.lower() in _NONE_WORDS:
                return []
            parts = re.split(r"[,;]", text)
            if len(parts) == 1:
                parts = text.split()
            value = [part.strip().strip("'\"") for part in parts]
    if not isinstance(value, list):
        value = [value]
    out: list[str] = []
    for entry in value:
        if isinstance(entry, dict):
            entry = _first(entry, _ID_KEYS, _id_text)
        text = _id_text(entry)
        if text and text.lower() not in _NONE_WORDS and text not in out:
            out.append(text)
    return out


# --------------------------------------------------------------------------- validation


def validate_plan(plan: Plan, max_steps: int = DEFAULT_MAX_STEPS) -> Plan:
    """A runnable copy of ``plan`` (see the module docstring for each rule).

    Raises :class:`PlanError` when no step has a task or the dependencies form a cycle.
    """
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")
    steps = [s for s in plan.steps if s.task and s.task.strip()]
    if not steps:
        raise PlanError("no step of the plan has a task")
    taken = {s.id for s in steps}
    seen: set[str] = set()
    unique: list[PlanStep] = []
    for step in steps:
        new_id = step.id
        if step.id in seen:  # references to this id keep meaning its first holder
            k = 2
            while f"{step.id}_{k}" in taken:
                k += 1
            new_id = f"{step.id}_{k}"
            taken.add(new_id)
            logger.info("plan: duplicate step id %r renamed %r", step.id, new_id)
        seen.add(step.id)
        unique.append(dataclasses.replace(step, id=new_id, task=step.task.strip()))
    known = {s.id for s in unique}
    checked = []
    for step in unique:
        deps: list[str] = []
        for dep in step.dependencies:
            if dep in known and dep != step.id and dep not in deps:
                deps.append(dep)
        if len(deps) != len(step.dependencies):
            logger.info(
                "plan: step %r dependencies %s kept as %s", step.id, step.dependencies, deps
            )
        checked.append(dataclasses.replace(step, dependencies=deps))
    order = _topological_order(checked)
    if len(order) > max_steps:
        logger.warning("plan of %d steps cut to %d", len(order), max_steps)
        kept = set(order[:max_steps])
        checked = [s for s in checked if s.id in kept]
    return Plan(checked)


def _topological_order(steps: list[PlanStep]) -> list[str]:
    """Kahn's algorithm, stable in plan order; raises PlanError on a cycle."""
    remaining = {s.id: set(s.dependencies) for s in steps}
    order: list[str] = []
    while remaining:
        ready = next((s.id for s in steps if s.id in remaining and not remaining[s.id]), None)
        if ready is None:
            raise PlanError(f"the plan's dependencies form a cycle among {sorted(remaining)}")
        order.append(ready)
        del remaining[ready]
        for deps in remaining.values():
            deps.discard(ready)
    return order
