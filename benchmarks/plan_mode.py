"""Plan mode against ReAct on a goal of three independent parts, at a fixed LLM latency.

The goal asks for the weather, the exchange rate to the euro and the local time in
Tokyo, Paris and New York: three parts, each one tool call, none needing another's result.

- **react** (:class:`engine.ReActAgent`): the model calls one tool per part, one after
  another (3 tool iterations), then streams the answer: 4 LLM calls, all sequential.
- **plan** (:class:`engine.plan.PlanAgent`): the planner (``submit_plan``) makes 3
  independent steps; each step, a fresh ReActAgent, calls its tool and streams its result
  (2 calls per step, the steps at the same time); the analyzer (``submit_analysis``)
  accepts; one streamed call answers: 9 LLM calls, 5 on the critical path.

Both run the real :class:`~engine.llm.openai.OpenAICompatibleLLM` over loopback against
:class:`~testing.scripted_server.ScriptedServer`, whose rules tell the requests apart
(plan mode: by system prompt and step task, as ``tests/engine/plan/scripts.py`` does; both
modes: by the tool result a request ends with). Every call waits ``--latency`` seconds
before its first byte (the response's ``delay``), streamed content (the answers, the
steps' results) comes one word per ``--chunk-delay`` seconds, and the tools are engine
tools that sleep ``--tool-latency`` seconds. No Django, no other service.

Per mode: wall time (``run()`` until the answer phase's ``Done``), time to the first
answer token (the first top-level ``answer`` delta; steps' own answers stay inside their
steps), LLM calls (requests the server received), medians of ``--repeat`` runs after one
warm-up run per mode, and the ratio plan / react. Beside them, the critical path in theory:
ReAct ``4 L + 3 T``, plan ``5 L + T`` (L the latency per call, T the tool latency), plus the
streamed chunks on the path. With n parts ReAct needs ``(n + 1) L + n T`` and plan still
``5 L + T`` (while n fits ``PlanConfig.concurrency``), so for three parts plan mode wins
only when one call costs less than two tool calls: ``L < 2 T`` less the steps' streams.

    .venv/bin/python benchmarks/plan_mode.py [--latency 1.0] [--tool-latency 0.2]
        [--chunk-delay 0.02] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.agent import ReActAgent  # noqa: E402
from engine.events import AnswerDelta, StepProgress  # noqa: E402
from engine.llm.openai import OpenAICompatibleLLM  # noqa: E402
from engine.llm.registry import ModelRegistry  # noqa: E402
from engine.plan import PlanAgent, PlanConfig, prompts  # noqa: E402
from engine.tools import ToolRegistry, tool  # noqa: E402
from testing.scripted_server import ScriptedServer  # noqa: E402

GOAL = (
    "What are the weather, the exchange rate to the euro and the local time in Tokyo, "
    "Paris and New York?"
)
CITIES = "Tokyo, Paris, New York"
# Each tool's result starts with its marker: a request that ends with it is answered next.
WEATHER = "WEATHER: Tokyo 18 °C clear; Paris 9 °C rain; New York 12 °C cloudy"
RATES = "EXCHANGE RATES to EUR: 1 JPY = 0.0061 EUR; 1 USD = 0.92 EUR; Paris uses the euro"
TIMES = "LOCAL TIMES: Tokyo 22:04; Paris 15:04; New York 09:04"
PARTS = [
    # (step id, step task, tool, its result, the step's streamed result)
    ("weather", f"Get the current weather in {CITIES}", "weather", WEATHER,
     "Tokyo 18 °C and clear, Paris 9 °C with rain, New York 12 °C and cloudy."),
    ("rates", f"Get the exchange rate to the euro of the currencies of {CITIES}", "rates",
     RATES, "1 JPY is 0.0061 EUR, 1 USD is 0.92 EUR, Paris already uses the euro."),
    ("times", f"Get the local time now in {CITIES}", "local_time", TIMES,
     "It is 22:04 in Tokyo, 15:04 in Paris and 09:04 in New York."),
]  # fmt: skip
ANSWER = (
    "Tokyo: 18 °C and clear, 1 JPY = 0.0061 EUR, 22:04. Paris: 9 °C with rain, "
    "the euro, 15:04. New York: 12 °C and cloudy, 1 USD = 0.92 EUR, 09:04."
)
VERDICT = {"achieved": True, "confidence": 0.95, "final_answer": "", "reasoning": "All there."}
PLAN = {
    "steps": [
        {"id": sid, "task": task, "dependencies": [], "tool_hint": name}
        for sid, task, name, _, _ in PARTS
    ]
}


def make_tools(latency: float) -> ToolRegistry:
    """Three engine tools that answer fixed strings after ``latency`` seconds."""

    @tool()
    async def weather(cities: str) -> str:
        """Current weather in the given cities."""
        await asyncio.sleep(latency)
        return WEATHER

    @tool()
    async def rates(cities: str) -> str:
        """Exchange rate to the euro of the currencies of the given cities."""
        await asyncio.sleep(latency)
        return RATES

    @tool()
    async def local_time(cities: str) -> str:
        """Local time now in the given cities."""
        await asyncio.sleep(latency)
        return TIMES

    return ToolRegistry([weather, rates, local_time])


# ---------------------------------------------------------------------------- scripts


def _call(name: str, latency: float) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": {"cities": CITIES}}], "delay": latency}


def _text(content: str, latency: float, chunk_delay: float) -> dict[str, Any]:
    return {"content": content, "delay": latency, "chunk_delay": chunk_delay}


def _marker(result: str) -> str:
    return result.split(":", 1)[0] + ":"


def react_rules(latency: float, chunk_delay: float) -> list[dict[str, Any]]:
    """One tool per part, one after another, then the answer: the next call is chosen by
    the tool result the request ends with."""
    (_, _, first, _, _), *rest = PARTS
    rules = [
        {"contains": _marker(TIMES), "in": "last", "response": _text(ANSWER, latency, chunk_delay)}
    ]
    for (_, _, _, done, _), (_, _, name, _, _) in zip(PARTS, rest, strict=False):
        rules.append({"contains": _marker(done), "in": "last", "response": _call(name, latency)})
    rules.append({"contains": GOAL, "response": _call(first, latency)})
    return rules


def plan_rules(latency: float, chunk_delay: float) -> list[dict[str, Any]]:
    """Planner, analyzer and answer writer by their system prompts; a step by its task
    (first call) or by the tool result its request ends with (second call)."""

    def system(prompt: str, response: dict[str, Any]) -> dict[str, Any]:
        return {"contains": prompt[:60], "in": "any", "response": response}

    def submit(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [{"name": name, "arguments": arguments}], "delay": latency}

    rules = [
        system(prompts.planner_system_prompt(10), submit("submit_plan", PLAN)),
        system(prompts.ANALYZER_SYSTEM_PROMPT, submit("submit_analysis", VERDICT)),
        system(prompts.ANSWER_SYSTEM_PROMPT, _text(ANSWER, latency, chunk_delay)),
    ]
    for _, _, _, result, step_answer in PARTS:
        rules.append(
            {
                "contains": _marker(result),
                "in": "last",
                "response": _text(step_answer, latency, chunk_delay),
            }
        )
    for _, task, name, _, _ in PARTS:
        rules.append({"contains": f"## Your step\n{task}", "response": _call(name, latency)})
    return rules


# ---------------------------------------------------------------------------- runs


@dataclass
class Sample:
    wall: float
    first_token: float
    calls: int
    steps_overlap: float = 0.0  # plan: seconds during which all 3 steps ran at once


@dataclass
class Theory:
    calls: int  # LLM calls on the critical path
    first_token: float
    wall: float


async def one_run(
    mode: str,
    server: ScriptedServer,
    llm: Any,
    tools: ToolRegistry,
    args: argparse.Namespace,
    latency: float,
) -> Sample:
    server.reset()
    rules = react_rules if mode == "react" else plan_rules
    server.set_rules(rules(latency, args.chunk_delay))
    first_token: list[float] = []
    spans: dict[str, list[float]] = {}

    async def on_event(event: Any) -> None:
        now = time.perf_counter()
        if isinstance(event, AnswerDelta) and event.content and not first_token:
            first_token.append(now)
        elif isinstance(event, StepProgress) and event.event in ("started", "completed"):
            spans.setdefault(event.step_id, []).append(now)

    if mode == "react":
        agent: Any = ReActAgent(llm, tools, on_event=on_event)
    else:
        registry = ModelRegistry()
        registry.register("main", llm, default=True)
        agent = PlanAgent(registry, tools, llm=llm, on_event=on_event, config=PlanConfig())
    started = time.perf_counter()
    result = await agent.run(GOAL)
    answer = "".join([piece async for piece in agent.stream_answer(result, GOAL)])
    wall = time.perf_counter() - started
    if result.status != "succeeded" or answer.strip() != ANSWER:
        raise SystemExit(f"{mode}: unexpected run: {result.status} {result.error} {answer!r}")
    if not first_token:
        raise SystemExit(f"{mode}: no answer token was streamed")
    overlap = 0.0
    if mode == "plan":
        if sorted(spans) != sorted(p[0] for p in PARTS):
            raise SystemExit(f"plan: steps seen {sorted(spans)}")
        overlap = max(0.0, min(s[-1] for s in spans.values()) - max(s[0] for s in spans.values()))
    return Sample(wall, first_token[0] - started, len(server.requests), overlap)


def theory(mode: str, latency: float, tool_latency: float, chunk_delay: float) -> Theory:
    """The critical path with no overhead at all: a streamed reply of k words costs k
    chunk delays after its first byte."""

    def stream(text: str) -> float:
        return len(text.split()) * chunk_delay

    if mode == "react":
        calls = len(PARTS) + 1
        first = calls * latency + len(PARTS) * tool_latency
    else:
        calls = 5  # planner, step call, step answer, analyzer, answer
        first = calls * latency + tool_latency + max(stream(part[4]) for part in PARTS)
    return Theory(calls, first, first + stream(ANSWER))


async def measure(args: argparse.Namespace) -> dict[str, list[Sample]]:
    server = ScriptedServer().start()
    try:
        llm = OpenAICompatibleLLM(
            server.base_url, None, "scripted-model", {"tool_call": True}, max_retries=0
        )
        tools = make_tools(args.tool_latency)
        for mode in ("react", "plan"):  # warm-up: connections, imports, validators
            await one_run(mode, server, llm, tools, args, latency=0.0)
        samples: dict[str, list[Sample]] = {"react": [], "plan": []}
        for n in range(args.repeat):
            for mode in ("react", "plan") if n % 2 == 0 else ("plan", "react"):
                sample = await one_run(mode, server, llm, tools, args, args.latency)
                samples[mode].append(sample)
                line = (
                    f"  run {n + 1} {mode:5s}: wall {sample.wall:.3f} s, first answer token "
                    f"{sample.first_token:.3f} s, {sample.calls} LLM calls"
                )
                if mode == "plan":
                    line += f", the 3 steps all running for {sample.steps_overlap:.3f} s"
                print(line)
        return samples
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per LLM call")
    parser.add_argument("--tool-latency", type=float, default=0.2, help="seconds per tool")
    parser.add_argument(
        "--chunk-delay", type=float, default=0.02, help="seconds between streamed words"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    print(
        f"plan mode against ReAct, {len(PARTS)} independent parts: latency {args.latency:g} s "
        f"per call, tools {args.tool_latency:g} s, chunk delay {args.chunk_delay:g} s, "
        f"{args.repeat} repeats, Python {sys.version.split()[0]}"
    )
    samples = asyncio.run(measure(args))
    medians = {
        mode: {
            "wall": statistics.median(s.wall for s in runs),
            "first": statistics.median(s.first_token for s in runs),
            "calls": statistics.median(s.calls for s in runs),
        }
        for mode, runs in samples.items()
    }
    paths = {m: theory(m, args.latency, args.tool_latency, args.chunk_delay) for m in medians}
    print()
    print(
        "| mode | LLM calls | on the critical path | first answer token (s) | in theory "
        "| wall (s) | in theory |"
    )
    print("|---|---|---|---|---|---|---|")
    for mode, m in medians.items():
        path = paths[mode]
        print(
            f"| {mode} | {m['calls']:g} | {path.calls} | {m['first']:.3f} "
            f"| {path.first_token:.2f} | {m['wall']:.3f} | {path.wall:.2f} |"
        )
    react, plan = medians["react"], medians["plan"]
    ratios = [
        plan["calls"] / react["calls"],
        paths["plan"].calls / paths["react"].calls,
        plan["first"] / react["first"],
        paths["plan"].first_token / paths["react"].first_token,
        plan["wall"] / react["wall"],
        paths["plan"].wall / paths["react"].wall,
    ]
    print("| plan / react | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")
    print()
    n, lat, tl = len(PARTS), args.latency, args.tool_latency
    print(
        f"critical path: react {n + 1} calls and {n} tools one after another "
        f"({n + 1} x {lat:g} + {n} x {tl:g} s); plan: planner, step call, tool, step answer, "
        f"analyzer, answer (5 x {lat:g} + {tl:g} s), the {n} steps side by side."
    )
    step_stream = max(len(part[4].split()) for part in PARTS) * args.chunk_delay
    even = (n - 1) * tl - step_stream
    print(
        f"plan - react = L - {n - 1} T + a step's streamed result ({step_stream:.2f} s): for "
        f"{n} parts plan mode gains only while a call costs less than {even:.2f} s; with n "
        "parts ReAct's path grows by L + T per part, plan mode's does not."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
