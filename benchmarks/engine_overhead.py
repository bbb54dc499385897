"""The engine's own cost per loop iteration, with an instant LLM and no-op tools.

Everything a real run spends waiting for the model or the tools is taken out, so what is
left is the loop itself: message building, parsing, argument validation, events and
bookkeeping. Target: under 0.2 ms per iteration.

    .venv/bin/python benchmarks/engine_overhead.py [--runs 1000] [--iterations 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from percentiles import pct  # noqa: E402

from engine.agent import ReActAgent  # noqa: E402
from engine.tools import ToolRegistry, tool  # noqa: E402
from testing.scripted_llm import ScriptedLLM  # noqa: E402

TARGET_MS = 0.2


@tool()
async def lookup(query: str, limit: int = 3) -> str:
    """Look something up (no-op)."""
    return "ok"


@tool()
async def compute(expression: str) -> str:
    """Evaluate an expression (no-op)."""
    return "42"


def _script(mode: str, iterations: int) -> list[Any]:
    """``iterations - 1`` tool calls, then a final answer: ``iterations`` LLM turns."""
    items: list[Any] = []
    for n in range(iterations - 1):
        name = "lookup" if n % 2 == 0 else "compute"
        args = {"query": f"q{n}"} if name == "lookup" else {"expression": f"{n}+1"}
        if mode == "native":
            items.append({"tool_calls": [{"name": name, "arguments": args}]})
        else:
            items.append(
                json.dumps(
                    {"type": "tool_call", "reasoning": "next", "tool_name": name, "tool_args": args}
                )
            )
    if mode == "native":
        items.append("All done.")
    else:
        items.append(json.dumps({"type": "final_answer", "reasoning": "done", "answer": "ok"}))
    return items


async def _one_run(mode: str, iterations: int, registry: ToolRegistry) -> float:
    llm = ScriptedLLM(
        _script(mode, iterations), abilities={"tool_call": mode == "native"}, record=False
    )
    agent = ReActAgent(llm, registry, on_event=lambda event: None)
    started = time.perf_counter()
    result = await agent.run("benchmark question")
    elapsed = time.perf_counter() - started
    assert result.status == "succeeded" and result.iterations == iterations, result
    return elapsed / iterations


async def _measure(mode: str, runs: int, iterations: int) -> list[float]:
    registry = ToolRegistry([lookup, compute])
    for _ in range(min(50, runs)):  # warm-up: imports, caches, validators
        await _one_run(mode, iterations, registry)
    gc.collect()
    return [await _one_run(mode, iterations, registry) for _ in range(runs)]


async def _peak_memory(mode: str, runs: int, iterations: int) -> int:
    registry = ToolRegistry([lookup, compute])
    tracemalloc.start()
    for _ in range(runs):
        await _one_run(mode, iterations, registry)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--iterations", type=int, default=5)
    args = parser.parse_args()

    python = sys.version.split()[0]
    print(f"engine overhead: {args.runs} runs x {args.iterations} iterations, Python {python}")
    ok = True
    for mode in ("json", "native"):
        per_iteration = asyncio.run(_measure(mode, args.runs, args.iterations))
        median_ms = statistics.median(per_iteration) * 1000
        p99_ms = pct(per_iteration, 99) * 1000
        peak = asyncio.run(_peak_memory(mode, min(args.runs, 200), args.iterations))
        ok = ok and median_ms < TARGET_MS
        print(
            f"  {mode:6s} per iteration: median {median_ms:.3f} ms, p99 {p99_ms:.3f} ms; "
            f"peak traced memory {peak / 1024:.0f} KiB"
        )
    print(f"target: median under {TARGET_MS} ms per iteration -> {'OK' if ok else 'OVER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
