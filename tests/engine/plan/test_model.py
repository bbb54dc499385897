"""parse_plan reads every plan shape models write; validate_plan makes it runnable."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine.plan import Plan, PlanError, PlanStep, parse_plan, validate_plan


def shape(plan: Plan) -> list[tuple[str, str, list[str]]]:
    return [(s.id, s.task, s.dependencies) for s in plan.steps]


STEPS = [{"id": "a", "task": "find A", "dependencies": []}, {"id": "b", "task": "use A"}]

PARSE_CASES: list[tuple[str, Any, list[tuple[str, str, list[str]]]]] = [
    ("object with steps", {"steps": STEPS}, [("a", "find A", []), ("b", "use A", [])]),
    ("bare list", STEPS, [("a", "find A", []), ("b", "use A", [])]),
    ("single step object", {"id": "a", "task": "find A"}, [("a", "find A", [])]),
    ("single step under steps", {"steps": {"id": "a", "task": "find A"}}, [("a", "find A", [])]),
    (
        "steps double-encoded",
        {"steps": json.dumps(STEPS)},
        [("a", "find A", []), ("b", "use A", [])],
    ),
    (
        "whole plan as fenced JSON text",
        "Here is the plan:\n```json\n" + json.dumps({"steps": STEPS}) + "\n```",
        [("a", "find A", []), ("b", "use A", [])],
    ),
    (
        "flattened fields",
        [
            {"step_id": "x", "description": "find X"},
            {"name": "y", "goal": "find Y"},
            {"step_id": "z", "description": "compare", "depends_on": "x, y"},
            {"step_id": "w", "description": "again", "deps": "x y"},
        ],
        [
            ("x", "find X", []),
            ("y", "find Y", []),
            ("z", "compare", ["x", "y"]),
            ("w", "again", ["x", "y"]),
        ],
    ),
    (
        "int ids and dependencies",
        {"steps": [{"id": 1, "task": "one"}, {"id": 2, "task": "two", "dependencies": [1]}]},
        [("1", "one", []), ("2", "two", ["1"])],
    ),
    (
        "dependency as a single int and as a JSON list in text",
        [
            {"id": 1, "task": "one"},
            {"id": 2, "task": "two", "dependencies": 1},
            {"id": 3, "task": "three", "dependencies": '["1", 2]'},
        ],
        [("1", "one", []), ("2", "two", ["1"]), ("3", "three", ["1", "2"])],
    ),
    (
        "missing ids get step<n>; 'none' means no dependency",
        [{"task": "one", "dependencies": "none"}, "two"],
        [("step1", "one", []), ("step2", "two", [])],
    ),
    (
        "steps keyed by id",
        {"s1": {"task": "one"}, "s2": {"task": "two", "dependencies": ["s1"]}},
        [("s1", "one", []), ("s2", "two", ["s1"])],
    ),
]


@pytest.mark.parametrize(
    ("raw", "expected"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES]
)
def test_parse_plan_shapes(raw: Any, expected: list[tuple[str, str, list[str]]]) -> None:
    assert shape(parse_plan(raw)) == expected


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        ("fast", "fast"),
        (" Reasoning ", "reasoning"),
        ("gpt-4o", None),
        ("smart", None),
        (None, None),
        (3, None),
    ],
)
def test_model_hint_outside_fast_and_reasoning_is_none(hint: Any, expected: str | None) -> None:
    [step] = parse_plan({"steps": [{"id": "a", "task": "t", "model_hint": hint}]}).steps
    assert step.model_hint == expected


def test_tool_hint_is_read_and_empty_words_mean_none() -> None:
    plan = parse_plan(
        [
            {"id": "a", "task": "t", "tool_hint": "web_search"},
            {"id": "b", "task": "t", "tool": "calculator"},
            {"id": "c", "task": "t", "tool_hint": "none"},
            {"id": "d", "task": "t", "tool_hint": ""},
        ]
    )
    assert [s.tool_hint for s in plan.steps] == ["web_search", "calculator", None, None]


@pytest.mark.parametrize(
    "raw",
    [None, 42, "", "no JSON here", {"foo": 1}, {"steps": []}, [], {"steps": "just do it"}],
)
def test_parse_plan_rejects_what_holds_no_step(raw: Any) -> None:
    with pytest.raises(PlanError):
        parse_plan(raw)


def test_plan_error_is_a_value_error() -> None:
    assert issubclass(PlanError, ValueError)


def test_to_dict_has_exactly_the_documented_fields() -> None:
    plan = Plan([PlanStep("s1", "find", ["s0"], "web_search", "fast")])
    assert plan.to_dict() == {
        "steps": [
            {
                "id": "s1",
                "task": "find",
                "dependencies": ["s0"],
                "tool_hint": "web_search",
                "model_hint": "fast",
            }
        ]
    }


# ------------------------------------------------------------------------------ validation


def plan_of(*steps: tuple[str, str, list[str]]) -> Plan:
    return Plan([PlanStep(i, t, list(d)) for i, t, d in steps])


VALIDATE_CASES = [
    (
        "unknown and self dependencies dropped",
        plan_of(("a", "A", ["zz", "a"]), ("b", "B", ["a", "a", "nope"])),
        [("a", "A", []), ("b", "B", ["a"])],
    ),
    (
        "duplicate ids renamed; references mean the first holder",
        plan_of(("a", "A1", []), ("a", "A2", []), ("b", "B", ["a"])),
        [("a", "A1", []), ("a_2", "A2", []), ("b", "B", ["a"])],
    ),
    (
        "a renamed duplicate avoids ids already taken",
        plan_of(("a", "A1", []), ("a_2", "other", []), ("a", "A2", [])),
        [("a", "A1", []), ("a_2", "other", []), ("a_3", "A2", [])],
    ),
    (
        "empty tasks dropped, with dependencies on them",
        plan_of(("a", "  ", []), ("b", " B ", ["a"])),
        [("b", "B", [])],
    ),
    (
        "more than max steps: the first ten, in plan order",
        plan_of(*[(f"s{n}", f"task {n}", []) for n in range(1, 13)]),
        [(f"s{n}", f"task {n}", []) for n in range(1, 11)],
    ),
]


@pytest.mark.parametrize(
    ("plan", "expected"), [c[1:] for c in VALIDATE_CASES], ids=[c[0] for c in VALIDATE_CASES]
)
def test_validate_plan(plan: Plan, expected: list[tuple[str, str, list[str]]]) -> None:
    assert shape(validate_plan(plan)) == expected


def test_cut_plan_keeps_every_kept_steps_dependencies() -> None:
    # "final" is listed first but needs the last two: dependency order decides what stays.
    plan = plan_of(("final", "F", ["x", "y"]), ("a", "A", []), ("x", "X", []), ("y", "Y", []))
    kept = validate_plan(plan, max_steps=3)
    assert shape(kept) == [("a", "A", []), ("x", "X", []), ("y", "Y", [])]
    assert shape(validate_plan(plan, max_steps=4))[0] == ("final", "F", ["x", "y"])


@pytest.mark.parametrize(
    "plan",
    [
        plan_of(("a", "A", ["b"]), ("b", "B", ["a"])),
        plan_of(("a", "A", []), ("b", "B", ["d"]), ("c", "C", ["b"]), ("d", "D", ["c"])),
    ],
    ids=["two-step cycle", "three-step cycle behind a free step"],
)
def test_cycles_are_rejected(plan: Plan) -> None:
    with pytest.raises(PlanError, match="cycle"):
        validate_plan(plan)


def test_no_task_at_all_is_rejected() -> None:
    with pytest.raises(PlanError):
        validate_plan(plan_of(("a", "", []), ("b", " ", [])))


def test_validation_does_not_change_its_input() -> None:
    plan = plan_of(("a", "A", ["a", "zz"]))
    validate_plan(plan)
    assert plan.steps[0].dependencies == ["a", "zz"]
