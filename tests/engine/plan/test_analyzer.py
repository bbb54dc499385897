"""The analyzer's verdict (JSON, free text, garbage), replan decisions, and the router."""

from __future__ import annotations

from typing import Any

import pytest

from engine.llm.base import UnavailableError
from engine.plan import Plan, PlanConfig, PlanStep, choose_mode
from engine.plan.analyzer import (
    Analysis,
    analysis_from_text,
    analyze,
    parse_analysis,
    should_replan,
)
from engine.plan.results import ExecutionReport, StepResult
from testing.scripted_llm import ScriptedLLM

from .scripts import verdict

PLAIN: dict[str, Any] = {}
STEP = PlanStep("s1", "Find the population of Oslo")
REPORT = ExecutionReport(1, Plan([STEP]), [StepResult(STEP, "completed", "Oslo: 709,000")])


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"achieved": True, "confidence": 0.9}, (True, 0.9)),
        ({"achieved": "yes", "confidence": "0.7"}, (True, 0.7)),
        ({"achieved": "false", "confidence": "85%"}, (False, 0.85)),
        ({"achieved": False, "confidence": 7}, (False, 1.0)),
        ({"achieved": False, "confidence": -0.2}, (False, 0.0)),
        ({"achieved": False, "confidence": "high"}, (False, 0.0)),
    ],
)
def test_parse_analysis_normalises_and_clamps(raw: dict[str, Any], expected: tuple) -> None:
    analysis = parse_analysis(raw)
    assert (analysis.achieved, analysis.confidence) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Achieved: yes\nConfidence: 0.9", (True, 0.9)),
        ('{"achieved": false, "confidence": 0.3 (broken', (False, 0.3)),
        ("The goal was not achieved; my confidence is 40%.", (False, 0.4)),
        ("The goal has been achieved.", (True, 1.0)),
        ("confidence: 2", (False, 1.0)),
    ],
)
def test_free_text_verdicts_are_read_by_the_regex_fallback(text: str, expected: tuple) -> None:
    found = analysis_from_text(text)
    assert found is not None
    assert (found["achieved"], found["confidence"]) == expected


def test_free_text_without_a_verdict_gives_nothing() -> None:
    assert analysis_from_text("I like turtles.") is None


async def test_analyze_reads_a_json_verdict() -> None:
    llm = ScriptedLLM([verdict(True, 0.92, "Oslo has 709,000 people.", "all found")])

    analysis = await analyze(llm, "How many people live in Oslo?", [REPORT])

    assert (analysis.achieved, analysis.confidence) == (True, 0.92)
    assert analysis.final_answer == "Oslo has 709,000 people."
    assert analysis.reasoning == "all found"
    assert analysis.usage.total_tokens == 15
    prompt = llm.calls[0]["messages"][-1].content
    assert "Oslo: 709,000" in prompt and "How many people live in Oslo?" in prompt


async def test_analyze_cuts_each_step_result() -> None:
    big = ExecutionReport(1, Plan([STEP]), [StepResult(STEP, "completed", "x" * 50_000)])
    llm = ScriptedLLM([verdict(False, 0.1)])

    await analyze(llm, "goal", [big], result_chars=10_000)

    prompt = llm.calls[0]["messages"][-1].content
    assert "x" * 10_000 in prompt and "x" * 10_001 not in prompt


async def test_analyze_falls_back_to_the_regex_on_free_text() -> None:
    llm = ScriptedLLM(["Achieved: no. Confidence: 0.35 - the population is missing."])

    analysis = await analyze(llm, "goal", [REPORT])

    assert (analysis.achieved, analysis.confidence, analysis.level) == (
        False,
        0.35,
        "plain_text",
    )


async def test_analyze_garbage_gives_the_default_verdict() -> None:
    llm = ScriptedLLM(["I like turtles.", "Still turtles."], abilities=PLAIN)

    analysis = await analyze(llm, "goal", [REPORT])

    assert (analysis.achieved, analysis.confidence, analysis.level) == (False, 0.0, "default")
    assert analysis.usage.total_tokens == 30  # both calls are counted


async def test_analyze_survives_a_failing_model() -> None:
    llm = ScriptedLLM([UnavailableError("down")] * 2)

    analysis = await analyze(llm, "goal", [REPORT])

    assert (analysis.achieved, analysis.confidence) == (False, 0.0)


@pytest.mark.parametrize(
    ("achieved", "confidence", "used", "replan"),
    [
        (False, 0.3, 0, True),
        (False, 0.79, 2, True),
        (False, 0.3, 3, False),  # budget spent
        (False, 0.8, 0, False),  # confident enough
        (True, 0.1, 0, False),  # achieved
    ],
)
def test_should_replan(achieved: bool, confidence: float, used: int, replan: bool) -> None:
    analysis = Analysis(achieved, confidence)
    assert should_replan(analysis, PlanConfig(), used) is replan


# ------------------------------------------------------------------------------ router


@pytest.mark.parametrize(
    ("reply", "mode"),
    [
        ('{"mode": "plan", "reason": "three cities"}', "plan"),
        ('{"mode": "react", "reason": "one question"}', "react"),
        ('{"mode": "PLAN"}', "plan"),
    ],
)
async def test_choose_mode_reads_the_models_choice(reply: str, mode: str) -> None:
    llm = ScriptedLLM([reply])
    assert await choose_mode(llm, "Compare Oslo, Bergen and Tromsø", []) == mode


@pytest.mark.parametrize(
    "script",
    [["nonsense", "more nonsense"], ['{"mode": "maybe"}'] * 2, [UnavailableError("down")] * 2],
    ids=["garbage", "unknown mode", "model down"],
)
async def test_choose_mode_falls_back_to_react(script: list[Any]) -> None:
    llm = ScriptedLLM(script, abilities=PLAIN)
    assert await choose_mode(llm, "hi", []) == "react"
