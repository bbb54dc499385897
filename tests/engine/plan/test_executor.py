"""PlanExecutor: ordering, real parallelism, limits, failures, Stop, follow-ups, models."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from engine.cancel import CancelledRun, CancelToken
from engine.events import (
    AgentEvent,
    Approval,
    Inject,
    StepProgress,
    event_from_dict,
)
from engine.interrupts import InterruptQueue
from engine.llm.base import UnavailableError
from engine.llm.registry import ModelRegistry
from engine.plan import Plan, PlanConfig, PlanExecutor, PlanStep
from engine.tools import Tool, ToolRegistry, tool
from testing.scripted_llm import ScriptedLLM

from .scripts import OBJECT, call, routed_llm

FAST = PlanConfig(poll_interval=0.01)
NO_CONNECTION = (
    "The model's server could not be reached (no connection). Retry, or an administrator "
    "can check that it is running at the provider's address."
)


def registry_with(llm: ScriptedLLM, **others: tuple[ScriptedLLM, tuple[str, ...]]) -> ModelRegistry:
    registry = ModelRegistry()
    registry.register("main", llm, default=True)
    for name, (model, roles) in others.items():
        registry.register(name, model, roles)
    return registry


def executor(
    llm: ScriptedLLM,
    tools: list[Tool] | None = None,
    events: list[AgentEvent] | None = None,
    *,
    registry: ModelRegistry | None = None,
    config: PlanConfig = FAST,
    **kwargs: Any,
) -> PlanExecutor:
    return PlanExecutor(
        registry or registry_with(llm),
        ToolRegistry(tools or []),
        llm=llm,
        config=config,
        on_event=events.append if events is not None else None,
        **kwargs,
    )


def progress(events: list[AgentEvent], kind: str | None = None) -> list[StepProgress]:
    return [e for e in events if isinstance(e, StepProgress) and kind in (None, e.event)]


def steps(*items: tuple[str, str, list[str]]) -> Plan:
    return Plan([PlanStep(i, t, list(d)) for i, t, d in items])


# ------------------------------------------------------------------------------ ordering


async def test_a_step_runs_after_its_dependency_and_sees_its_result() -> None:
    llm = routed_llm({"find A": ["A is 42"], "double A": ["A doubled is 84"]})
    events: list[AgentEvent] = []
    plan = steps(("s2", "double A", ["s1"]), ("s1", "find A", []))

    report = await executor(llm, events=events).run(plan, "double A")

    assert [(r.step.id, r.status, r.result) for r in report.results] == [
        ("s2", "completed", "A doubled is 84"),
        ("s1", "completed", "A is 42"),
    ]
    order = [(e.step_id, e.event) for e in progress(events) if e.event != "iteration"]
    assert order == [
        ("s1", "started"),
        ("s1", "completed"),
        ("s2", "started"),
        ("s2", "completed"),
    ]
    s2_query = next(c for c in llm.calls if "## Your step\ndouble A" in c["messages"][-1].content)
    assert "A is 42" in s2_query["messages"][-1].content
    assert report.iterations == 2 and report.usage.total_tokens == 30


async def test_dependency_results_are_cut_to_the_limit() -> None:
    llm = routed_llm({"find A": ["x" * 5_000], "use A": ["done"]})
    plan = steps(("s1", "find A", []), ("s2", "use A", ["s1"]))
    config = PlanConfig(dependency_chars=1_000, poll_interval=0.01)

    await executor(llm, config=config).run(plan, "goal")

    query = next(c for c in llm.calls if "## Your step\nuse A" in c["messages"][-1].content)
    text = query["messages"][-1].content
    assert "x" * 1_000 in text and "x" * 1_001 not in text


async def test_independent_steps_really_run_in_parallel() -> None:
    @tool()
    async def nap() -> str:
        """Sleep one second."""
        await asyncio.sleep(1)
        return "rested"

    llm = routed_llm(
        {
            "rest one": [call("nap"), "one rested"],
            "rest two": [call("nap"), "two rested"],
        }
    )
    plan = steps(("a", "rest one", []), ("b", "rest two", []))

    started = time.perf_counter()
    report = await executor(llm, [nap]).run(plan, "rest")
    elapsed = time.perf_counter() - started

    assert [r.status for r in report.results] == ["completed", "completed"]
    assert elapsed < 1.8  # sequential would take 2 s at least
    assert [s.tool_name for s in report.tool_steps] == ["nap", "nap"]


async def test_concurrency_caps_the_steps_running_at_once() -> None:
    running, peak = 0, 0

    @tool()
    async def work() -> str:
        """Work a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return "worked"

    llm = routed_llm({f"job {n}": [call("work"), f"job {n} done"] for n in range(4)})
    plan = steps(*[(f"s{n}", f"job {n}", []) for n in range(4)])
    config = PlanConfig(concurrency=2, poll_interval=0.01)

    report = await executor(llm, [work], config=config).run(plan, "jobs")

    assert all(r.completed for r in report.results)
    assert peak == 2


# ------------------------------------------------------------------------------ failures


async def test_a_step_that_runs_too_long_fails_and_so_do_its_dependants() -> None:
    @tool()
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(30)
        return "late"

    llm = routed_llm({"slow one": [call("slow")], "after": ["unreachable"]})
    events: list[AgentEvent] = []
    plan = steps(("s1", "slow one", []), ("s2", "after", ["s1"]))
    config = PlanConfig(step_timeout=0.2, poll_interval=0.01)

    started = time.perf_counter()
    report = await executor(llm, [slow], events, config=config).run(plan, "goal")

    assert time.perf_counter() - started < 5
    s1, s2 = report.results
    assert (s1.status, s1.error) == ("failed", "the step timed out after 0.2 s")
    assert (s2.status, s2.error) == ("failed", "dependency s1 failed")
    assert [(e.step_id, e.extra["error"]) for e in progress(events, "failed")] == [
        ("s1", "the step timed out after 0.2 s"),
        ("s2", "dependency s1 failed"),
    ]
    assert [s.tool_name for s in s1.tool_steps] == []  # the call never ended
    assert llm.asked.count("after") == 0  # type: ignore[attr-defined]


async def test_a_failed_step_fails_its_dependants_transitively_and_spares_the_rest() -> None:
    llm = routed_llm(
        {
            "broken": [UnavailableError("server down")],
            "fine": ["fine result"],
        }
    )
    plan = steps(
        ("s1", "broken", []),
        ("s2", "needs s1", ["s1"]),
        ("s3", "needs s2", ["s2"]),
        ("s4", "fine", []),
    )

    report = await executor(llm).run(plan, "goal")

    assert [(r.step.id, r.status, r.error) for r in report.results] == [
        ("s1", "failed", NO_CONNECTION),
        ("s2", "failed", "dependency s1 failed"),
        ("s3", "failed", "dependency s2 failed"),
        ("s4", "completed", None),
    ]


async def test_steps_that_can_never_run_fail_as_a_deadlock() -> None:
    llm = routed_llm({"free": ["free result"]})
    events: list[AgentEvent] = []
    # Not validated: a cycle and a dependency on a missing step.
    plan = steps(
        ("a", "loop a", ["b"]),
        ("b", "loop b", ["a"]),
        ("c", "free", []),
        ("d", "orphan", ["ghost"]),
    )

    report = await executor(llm, events=events).run(plan, "goal")

    outcome = {r.step.id: (r.status, r.error or "") for r in report.results}
    assert outcome["c"] == ("completed", "")
    for step_id in ("a", "b", "d"):
        assert outcome[step_id][0] == "failed"
        assert outcome[step_id][1].startswith("deadlock")
    assert {e.step_id for e in progress(events, "failed")} == {"a", "b", "d"}


async def test_a_step_that_hits_its_iteration_limit_fails() -> None:
    @tool()
    def ping(n: int) -> str:
        """Ping."""
        return "pong"

    llm = routed_llm({"loop": [call("ping", n=k) for k in range(3)]})
    config = PlanConfig(max_step_iterations=3, poll_interval=0.01)

    report = await executor(llm, [ping], config=config).run(steps(("s1", "loop", [])), "goal")

    [result] = report.results
    assert result.status == "failed" and "3 iterations" in (result.error or "")
    assert result.iterations == 3 and len(result.tool_steps) == 3


# ------------------------------------------------------------------------------ Stop


async def test_stop_cancels_every_running_step_and_raises() -> None:
    token = CancelToken()
    cancelled: list[str] = []
    both_running = asyncio.Event()
    arrived = 0

    async def hang(who: str) -> str:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both_running.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(who)
            raise
        return "never"

    async def press_stop() -> None:
        await both_running.wait()
        token.cancel()

    hang_tool = Tool("hang", "Hang.", {"type": "object", "properties": {"who": {}}}, hang)
    llm = routed_llm(
        {
            "first": [call("hang", who="first"), "unreachable"],
            "second": [call("hang", who="second"), "unreachable"],
            "third": ["unreachable"],
        }
    )
    events: list[AgentEvent] = []
    plan = steps(("a", "first", []), ("b", "second", []), ("c", "third", ["a"]))
    stopper = asyncio.ensure_future(press_stop())

    started = time.perf_counter()
    with pytest.raises(CancelledRun):
        await executor(llm, [hang_tool], events, cancel=token).run(plan, "goal")

    await stopper
    assert time.perf_counter() - started < 5
    assert sorted(cancelled) == ["first", "second"]
    assert llm.asked.count("third") == 0  # type: ignore[attr-defined]
    failed = progress(events, "failed")
    assert sorted(e.step_id for e in failed) == ["a", "b"]
    assert all(e.extra["error"] == "Cancelled by the user" for e in failed)
    assert all(call["closed"] for call in llm.calls if call["stream"])


# ------------------------------------------------------------------------------ follow-ups


async def test_a_follow_up_skips_unstarted_steps_and_lets_running_ones_finish() -> None:
    queue = InterruptQueue()

    @tool()
    async def work() -> str:
        """Work, while the user sends a follow-up."""
        queue.put("Actually, only Bergen please")
        await asyncio.sleep(0.05)
        return "worked"

    llm = routed_llm({"running": [call("work"), "running finished"]})
    events: list[AgentEvent] = []
    plan = steps(("s1", "running", []), ("s2", "waits for s1", ["s1"]), ("s3", "queued", []))
    config = PlanConfig(concurrency=1, poll_interval=0.01)

    report = await executor(llm, [work], events, config=config, interrupt_queue=queue).run(
        plan, "goal"
    )

    assert [(r.step.id, r.status) for r in report.results] == [
        ("s1", "completed"),
        ("s2", "skipped"),
        ("s3", "skipped"),
    ]
    assert report.followups == ["Actually, only Bergen please"]
    assert [e.content for e in events if isinstance(e, Inject)] == report.followups
    skipped = progress(events, "skipped")
    assert sorted(e.step_id for e in skipped) == ["s2", "s3"]
    assert all(e.elapsed == 0 and e.extra["reason"] for e in skipped)
    assert len(queue) == 0


# ------------------------------------------------------------------------------ models


async def test_each_step_runs_on_the_model_its_hint_asks_for() -> None:
    main = routed_llm({"plain": ["main did it"], "odd hint": ["main again"]})
    fast = routed_llm({"quick": ["fast did it"]})
    other = routed_llm({})
    registry = ModelRegistry()
    # The registry's default is NOT the conversation's model: no role must mean `main`.
    registry.register("other", other, default=True)
    registry.register("main", main)
    registry.register("fast-model", fast, roles=("fast",))
    events: list[AgentEvent] = []
    plan = Plan(
        [
            PlanStep("a", "quick", model_hint="fast"),
            PlanStep("b", "plain"),
            PlanStep("c", "odd hint", model_hint="reasoning"),
        ]
    )

    report = await executor(main, events=events, registry=registry).run(plan, "goal")

    assert [r.result for r in report.results] == ["fast did it", "main did it", "main again"]
    assert fast.asked == ["quick"]  # type: ignore[attr-defined]
    assert sorted(main.asked) == ["odd hint", "plain"]  # type: ignore[attr-defined]
    assert other.calls == []
    models = {e.step_id: e.model for e in progress(events, "started")}
    assert models == {"a": "fast-model", "b": "main", "c": "main"}


# ------------------------------------------------------------------------------ events


async def test_step_progress_events_carry_the_documented_fields() -> None:
    @tool()
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: 709,000 people"

    llm = routed_llm({"find Oslo": [call("lookup", city="Oslo"), "Oslo has 709,000 people"]})
    events: list[AgentEvent] = []

    await executor(llm, [lookup], events).run(steps(("s1", "find Oslo", [])), "goal", round_no=2)

    payloads = [e.to_dict() for e in progress(events)]
    base = {"step_id", "event", "task", "model", "elapsed", "tokens", "round"}
    assert all(base <= set(p) and p["round"] == 2 and p["model"] == "main" for p in payloads)
    kinds = [(p["event"], p.get("status")) for p in payloads]
    assert kinds == [
        ("started", None),
        ("iteration", None),
        ("tool", "start"),
        ("tool", "done"),
        ("iteration", None),
        ("completed", None),
    ]
    started, it1, tool_start, tool_done, _, completed = payloads
    assert (started["elapsed"], started["tokens"], started["task"]) == (0.0, 0, "find Oslo")
    assert it1["iteration"] == 1
    assert tool_start["tool_name"] == "lookup" and tool_start["tool_args"] == {"city": "Oslo"}
    assert tool_done["observation"] == "Oslo: 709,000 people" and tool_done["error"] is None
    assert "iter_elapsed" in tool_done and tool_done["tokens"] == 15
    assert completed["result"] == "Oslo has 709,000 people"
    assert (completed["iterations"], completed["tokens"]) == (2, 30)
    assert all(isinstance(e, StepProgress) for e in events)  # no answer/thinking leak out
    for payload in payloads:
        assert event_from_dict("step_progress", payload).to_dict() == payload


async def test_a_completed_steps_result_is_cut_in_its_event_only() -> None:
    llm = routed_llm({"long": ["y" * 3_000]})
    events: list[AgentEvent] = []

    report = await executor(llm, events=events).run(steps(("s1", "long", [])), "goal")

    assert len(report.results[0].result) == 3_000
    [completed] = progress(events, "completed")
    assert completed.extra["result"] == "y" * 2_000


async def test_approval_requests_of_a_step_reach_the_user() -> None:
    async def approve(request: Any) -> str:
        return "approved"

    danger = Tool("danger", "Needs approval.", OBJECT, lambda: "done", requires_confirmation=True)
    llm = routed_llm({"risky": [call("danger"), "it is done"]})
    events: list[AgentEvent] = []

    report = await executor(llm, [danger], events, approver=approve).run(
        steps(("s1", "risky", [])), "goal"
    )

    assert report.results[0].completed
    assert [e.status for e in events if isinstance(e, Approval)] == ["requested", "approved"]
