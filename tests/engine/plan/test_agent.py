"""PlanAgent end to end with scripted models: events, replanning, follow-ups, fallbacks."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.agent import AgentResult
from engine.cancel import CancelToken
from engine.events import (
    AgentEvent,
    AnswerDelta,
    AnswerDone,
    AnswerSignal,
    AnswerStart,
    Done,
    Inject,
    Phase,
    StepProgress,
)
from engine.interrupts import InterruptQueue
from engine.llm.base import UnavailableError
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage
from engine.plan import PlanAgent, PlanConfig
from engine.plan.agent import ANSWER_FALLBACK_NOTE
from engine.tools import Tool, ToolRegistry, tool
from testing.scripted_llm import ScriptedLLM

from .scripts import ANALYZER, ANSWER, PLANNER, call, plan_reply, routed_llm, verdict, who

FAST = PlanConfig(poll_interval=0.01)
GOAL = "Compare the weather in Oslo and Bergen"
OSLO, BERGEN = "Find the weather in Oslo", "Find the weather in Bergen"
HISTORY = [
    ChatMessage("user", "I am planning a trip to Norway."),
    ChatMessage("assistant", "Nice! How can I help?"),
]
ANSWER_TEXT = "Oslo is 12 °C with rain; Bergen is 10 °C with wind."


def agent_for(
    llm: ScriptedLLM,
    events: list[AgentEvent],
    tools: list[Tool] | None = None,
    registry: ModelRegistry | None = None,
    **kwargs: Any,
) -> PlanAgent:
    if registry is None:
        registry = ModelRegistry()
        registry.register("main", llm, default=True)
    kwargs.setdefault("config", FAST)
    return PlanAgent(registry, ToolRegistry(tools or []), on_event=events.append, **kwargs)


async def finish(agent: PlanAgent, result: AgentResult, query: str = GOAL) -> list[str]:
    return [chunk async for chunk in agent.stream_answer(result, query)]


def outline(events: list[AgentEvent]) -> list[str]:
    """The run's shape: phases by name, runs of step/answer events collapsed."""
    labels: list[str] = []
    for event in events:
        if isinstance(event, Phase):
            label = f"{event.phase}:{event.extra.get('round', '')}"
        elif isinstance(event, StepProgress):
            label = "steps"
        elif isinstance(event, AnswerDelta):
            label = "delta"
        else:
            label = type(event).__name__
        if not labels or labels[-1] != label or label.startswith(("planning", "exec")):
            labels.append(label)
    return labels


def who_is(call_record: dict[str, Any]) -> str:
    return who(call_record["messages"])


def phases(events: list[AgentEvent], name: str) -> list[dict[str, Any]]:
    return [e.to_dict() for e in events if isinstance(e, Phase) and e.phase == name]


def two_city_llm(**routes: list[Any]) -> ScriptedLLM:
    script: dict[str, list[Any]] = {
        PLANNER: [plan_reply(("s1", OSLO, []), ("s2", BERGEN, []))],
        OSLO: ["Oslo: 12 °C, rain"],
        BERGEN: ["Bergen: 10 °C, wind"],
        ANALYZER: [verdict(True, 0.9, "Oslo 12, Bergen 10", "both cities found")],
        ANSWER: [ANSWER_TEXT],
    }
    script.update(routes)
    return routed_llm(script)


async def test_a_plan_run_emits_phases_steps_then_the_streamed_answer() -> None:
    llm = two_city_llm()
    events: list[AgentEvent] = []
    agent = agent_for(llm, events)

    result = await agent.run(GOAL, HISTORY)
    streamed_during_run = len(events)
    chunks = await finish(agent, result)

    assert outline(events) == [
        "planning:1",
        "executing:1",
        "steps",
        "analyzing:1",
        "analyzed:1",
        "AnswerStart",
        "delta",
        "AnswerDone",
        "Done",
    ]
    assert isinstance(events[streamed_during_run - 1], AnswerDelta)  # before stream_answer
    deltas = [e.content for e in events if isinstance(e, AnswerDelta)]
    assert len(deltas) > 1 and "".join(deltas) == ANSWER_TEXT
    assert chunks == [ANSWER_TEXT]
    [executing] = phases(events, "executing")
    assert executing["plan"]["steps"][1] == {
        "id": "s2",
        "task": BERGEN,
        "dependencies": [],
        "tool_hint": None,
        "model_hint": None,
    }
    assert phases(events, "analyzed") == [
        {
            "phase": "analyzed",
            "round": 1,
            "achieved": True,
            "confidence": 0.9,
            "reasoning": "both cities found",
        }
    ]
    done = events[-1]
    assert isinstance(done, Done)
    assert (done.answer, done.status, done.iterations) == (ANSWER_TEXT, "succeeded", 2)
    # planner + two steps + analyzer + answer, 15 tokens each
    assert done.usage["total_tokens"] == 75 == result.usage.total_tokens
    assert result.answer_streamed and result.status == "succeeded"
    assert result.stop_reason == "answer" and result.history == HISTORY


async def test_the_answer_call_sees_the_conversation_the_goal_and_the_results() -> None:
    llm = two_city_llm()
    agent = agent_for(llm, [])

    await agent.run(GOAL, HISTORY)

    planner = next(c for c in llm.calls if "planner" in c["messages"][0].content)
    assert "I am planning a trip to Norway." in planner["messages"][-1].content
    [answer] = [c for c in llm.calls if who_is(c) == ANSWER]
    sent = answer["messages"]
    assert [(m.role, m.content) for m in sent[1:3]] == [(m.role, m.content) for m in HISTORY]
    prompt = sent[-1].content
    assert GOAL in prompt and "Oslo: 12 °C, rain" in prompt and "Bergen: 10 °C, wind" in prompt
    assert "Oslo 12, Bergen 10" in prompt  # the analyzer's draft


async def test_low_confidence_replans_up_to_three_times() -> None:
    low = [verdict(False, 0.2, reasoning=f"still missing {n}") for n in range(1, 5)]
    llm = two_city_llm(
        **{
            PLANNER: [plan_reply(("s1", OSLO, []))] * 4,
            OSLO: ["r" * 1_000] * 4,
            ANALYZER: low,
        }
    )
    events: list[AgentEvent] = []

    result = await agent_for(llm, events).run(GOAL)

    assert phases(events, "replanning") == [
        {"phase": "replanning", "round": n + 1, "reason": f"still missing {n}"} for n in (1, 2, 3)
    ]
    assert [p["round"] for p in phases(events, "analyzed")] == [1, 2, 3, 4]
    assert llm.asked.count(PLANNER) == 4  # type: ignore[attr-defined]
    assert result.iterations == 4 and result.status == "succeeded"
    planners = [c["messages"][-1].content for c in llm.calls if who_is(c) == PLANNER]
    assert "earlier rounds" not in planners[0]
    # the latest round's results cut to 500 characters, older ones to 200
    assert "r" * 500 in planners[1] and "r" * 501 not in planners[1]
    round_3 = planners[2]
    older, latest = round_3.split("### Round 2")
    assert "r" * 200 in older and "r" * 201 not in older
    assert "r" * 500 in latest and "still missing 2" in latest


async def test_replanning_stops_once_confidence_reaches_the_target() -> None:
    llm = two_city_llm(
        **{
            PLANNER: [plan_reply(("s1", OSLO, []))] * 2,
            OSLO: ["partial", "complete"],
            ANALYZER: [verdict(False, 0.4, reasoning="Bergen missing"), verdict(False, 0.85)],
        }
    )
    events: list[AgentEvent] = []

    await agent_for(llm, events).run(GOAL)

    assert [p["round"] for p in phases(events, "planning")] == [1, 2]
    assert len(phases(events, "replanning")) == 1


async def test_a_follow_up_mid_plan_replans_without_spending_the_budget() -> None:
    queue = InterruptQueue()

    @tool()
    async def forecast(city: str) -> str:
        """The weather of a city."""
        queue.put("Also add Tromsø, please")
        await asyncio.sleep(0.05)
        return f"{city}: 12 °C"

    llm = routed_llm(
        {
            PLANNER: [
                plan_reply(("s1", OSLO, []), ("s2", "Compare the cities", ["s1"])),
                plan_reply(("t1", "Find the weather in Tromsø", [])),
            ],
            OSLO: [call("forecast", city="Oslo"), "Oslo: 12 °C"],
            "Find the weather in Tromsø": ["Tromsø: 2 °C"],
            ANALYZER: [verdict(False, 0.5, reasoning="not sure")],
            ANSWER: ["Oslo 12 °C, Tromsø 2 °C."],
        }
    )
    events: list[AgentEvent] = []
    config = PlanConfig(max_replans=0, poll_interval=0.01)

    result = await agent_for(llm, events, [forecast], interrupt_queue=queue, config=config).run(
        GOAL
    )

    assert outline(events)[:8] == [
        "planning:1",
        "executing:1",
        "steps",
        "Inject",
        "steps",
        "replanning:2",
        "planning:2",
        "executing:2",
    ]
    assert [e.content for e in events if isinstance(e, Inject)] == ["Also add Tromsø, please"]
    skipped = [e.step_id for e in events if isinstance(e, StepProgress) and e.event == "skipped"]
    assert skipped == ["s2"]
    assert [p["round"] for p in phases(events, "analyzed")] == [2]  # round 1 was not judged
    assert "Also add Tromsø, please" in phases(events, "replanning")[0]["reason"]
    planners = [c["messages"][-1].content for c in llm.calls if who_is(c) == PLANNER]
    assert "Also add Tromsø, please" in planners[1] and "Oslo: 12 °C" in planners[1]
    [answer] = [c for c in llm.calls if who_is(c) == ANSWER]
    assert "Also add Tromsø, please" in answer["messages"][-1].content
    assert result.answer == "Oslo 12 °C, Tromsø 2 °C." and result.pending_injections == []


async def test_a_follow_up_sent_during_the_analysis_also_replans() -> None:
    queue = InterruptQueue()

    def verdict_while_user_writes(messages: Any, kwargs: Any) -> str:
        queue.put("in Fahrenheit")
        return verdict(True, 0.95)

    llm = two_city_llm(
        **{
            PLANNER: [plan_reply(("s1", OSLO, []))] * 2,
            OSLO: ["12 °C", "54 °F"],
            ANALYZER: [verdict_while_user_writes, verdict(True, 0.95)],
        }
    )
    events: list[AgentEvent] = []

    await agent_for(llm, events, interrupt_queue=queue, config=PlanConfig(max_replans=0)).run(GOAL)

    assert [p["round"] for p in phases(events, "analyzed")] == [1, 2]
    assert [e.content for e in events if isinstance(e, Inject)] == ["in Fahrenheit"]


async def test_stop_mid_plan_ends_the_run_cancelled_without_done() -> None:
    token = CancelToken()

    @tool()
    async def forecast(city: str) -> str:
        """The weather of a city."""
        token.cancel()
        await asyncio.sleep(30)
        return "never"

    llm = two_city_llm(**{OSLO: [call("forecast", city="Oslo"), "unreachable"]})
    events: list[AgentEvent] = []
    agent = agent_for(llm, events, [forecast], cancel=token)

    result = await agent.run(GOAL)
    chunks = await finish(agent, result)

    assert (result.status, result.stop_reason) == ("cancelled", "cancelled")
    assert chunks == [] and not any(isinstance(e, Done | AnswerStart) for e in events)
    assert ANALYZER not in llm.asked  # type: ignore[attr-defined]


async def test_no_usable_plan_means_a_react_run_answers_instead() -> None:
    llm = routed_llm(
        {
            PLANNER: ["I cannot plan this.", "Really not.", "No."],
            GOAL: ["Both are rainy today."],
        }
    )
    events: list[AgentEvent] = []
    agent = agent_for(llm, events)

    result = await agent.run(GOAL, HISTORY)
    await finish(agent, result)

    [failed] = phases(events, "planning_failed")
    assert failed["reason"]
    assert outline(events) == [
        "planning:1",
        "planning_failed:",
        "ThinkingStart",
        "AnswerStart",
        "delta",
        "ThinkingDone",
        "AnswerDone",
        "Done",
    ]
    assert result.answer == "Both are rainy today." and result.status == "succeeded"
    assert result.usage.total_tokens == 4 * 15  # three planner calls, one ReAct call
    done = events[-1]
    assert isinstance(done, Done) and done.usage["total_tokens"] == 60


async def test_planner_and_analyzer_use_the_reasoning_model_steps_and_answer_the_chat_model():
    thinker = routed_llm(
        {
            PLANNER: [plan_reply(("s1", OSLO, []))],
            ANALYZER: [verdict(True, 0.9)],
        }
    )
    main = routed_llm({OSLO: ["Oslo: 12 °C"], ANSWER: ["Oslo is mild."]})
    registry = ModelRegistry()
    registry.register("main", main, default=True)
    registry.register("thinker", thinker, roles=("reasoning",))
    events: list[AgentEvent] = []

    result = await agent_for(main, events, registry=registry).run(GOAL)

    assert thinker.asked == [PLANNER, ANALYZER]  # type: ignore[attr-defined]
    assert main.asked == [OSLO, ANSWER]  # type: ignore[attr-defined]
    assert result.answer == "Oslo is mild."


async def test_without_an_llm_the_registry_default_is_the_conversations_model() -> None:
    llm = two_city_llm()
    registry = ModelRegistry()
    registry.register("main", llm, default=True)

    agent = PlanAgent(registry, [], config=FAST)

    assert agent.llm is llm and agent.planner_llm is llm


async def test_when_the_answer_call_fails_the_analyzers_draft_is_the_answer() -> None:
    llm = two_city_llm(**{ANSWER: [UnavailableError("down")]})
    events: list[AgentEvent] = []
    agent = agent_for(llm, events)

    result = await agent.run(GOAL)
    chunks = await finish(agent, result)

    assert not result.answer_streamed and chunks == ["Oslo 12, Bergen 10"]
    assert outline(events)[-5:] == ["AnswerSignal", "AnswerStart", "delta", "AnswerDone", "Done"]
    done = events[-1]
    assert isinstance(done, Done)
    assert (done.answer, done.status, done.reason) == (
        "Oslo 12, Bergen 10",
        "succeeded",
        ANSWER_FALLBACK_NOTE,
    )
    assert any(isinstance(e, AnswerSignal) for e in events)
    assert not any(isinstance(e, AnswerDone) for e in events[:-2])


async def test_a_follow_up_sent_while_planning_replans_before_anything_runs() -> None:
    queue = InterruptQueue()

    def plan_while_user_writes(messages: Any, kwargs: Any) -> str:
        queue.put("Only Oslo")
        return plan_reply(("s1", OSLO, []), ("s2", BERGEN, []))

    llm = two_city_llm(**{PLANNER: [plan_while_user_writes, plan_reply(("s1", OSLO, []))]})
    events: list[AgentEvent] = []

    await agent_for(llm, events, interrupt_queue=queue).run(GOAL)

    assert outline(events)[:5] == [
        "planning:1",
        "Inject",
        "replanning:2",
        "planning:2",
        "executing:2",
    ]
    assert BERGEN not in llm.asked  # type: ignore[attr-defined]
    planners = [c["messages"][-1].content for c in llm.calls if who_is(c) == PLANNER]
    assert "Only Oslo" in planners[1]
