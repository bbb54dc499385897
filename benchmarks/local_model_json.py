"""JSON-mode actions from the bundled SmolLM2 model: prompt-only vs schema-constrained.

Each task is one JSON-mode agent turn: the engine's JSON-mode system prompt with a small
tool catalog, and a question that clearly needs one tool. The same tasks run twice:

- ``prompt-only``: the format is only described in the system prompt (no
  ``response_format``), as for a model without JSON abilities;
- ``schema-constrained``: ``response_format`` in llama.cpp's dialect with the engine's
  action schema (``type`` and the tool names as enums), what the agent sends for a model
  with ``json_schema`` + ``json_schema_dialect="llamacpp"``.

A reply is *valid* when it parses as JSON and matches the action schema (a tool call
names a listed tool and its arguments pass the tool's schema); *correct* when it is a
valid call of the expected tool. Greedy decoding, so the figures are reproducible.

    .venv/bin/python benchmarks/local_model_json.py [--base-url URL --api-key KEY]

Without ``--base-url`` it starts its own llama.cpp server (``make local-model`` first),
with ``--chat-format`` (default ``chatml``, what the site runs; ``chatml-function-calling``
HTML-escapes the prompt).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import ChatMessage, OpenAICompatibleLLM, Tool, ToolRegistry  # noqa: E402
from engine.actions import ACTION_FORMAT_NAME, action_schema  # noqa: E402
from engine.prompts import json_system_prompt  # noqa: E402
from engine.structured import extract_json, json_response_format  # noqa: E402
from llms.local_server import (  # noqa: E402
    DEFAULT_CHAT_FORMAT,
    LocalServer,
    LocalServerConfig,
)

MAX_TOKENS = 160
SAMPLING = {"temperature": 0.0, "seed": 7}


def _noop(**_: Any) -> str:
    return ""


TOOLS = ToolRegistry(
    [
        Tool(
            "calculator",
            "Evaluate an arithmetic expression, e.g. 17 * 23.",
            {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
            _noop,
        ),
        Tool(
            "get_weather",
            "Get the current weather for a city.",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            _noop,
        ),
        Tool(
            "web_search",
            "Search the web and return the top results for a query.",
            {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
            _noop,
        ),
    ]
)

# (question, the tool a correct first step calls)
TASKS: list[tuple[str, str]] = [
    ("What is 17 * 23? Use the calculator.", "calculator"),
    ("What is the weather in Paris right now?", "get_weather"),
    ("Search the web for the latest news about the Django web framework.", "web_search"),
    ("Compute 1234 + 5678 with the calculator tool.", "calculator"),
    ("Is it raining in London today? Check the weather.", "get_weather"),
    ("Find recent articles about llama.cpp on the web.", "web_search"),
    ("What is 2 to the power of 10? Calculate it.", "calculator"),
]


@dataclass
class Outcome:
    valid: bool
    correct: bool
    reply: str
    seconds: float


def judge(reply: str, expected: str, schema: dict[str, Any]) -> tuple[bool, bool]:
    """(valid, correct) of one reply, as defined in the module docstring."""
    try:
        value = extract_json(reply) if reply.strip().startswith("{") else json.loads(reply)
        jsonschema.validate(value, schema)
    except (ValueError, jsonschema.ValidationError):
        return False, False
    if value["type"] == "final_answer":
        return "answer" in value, False
    tool = TOOLS.get(value.get("tool_name", ""))
    if tool is None or tool.validation_error(value.get("tool_args", {})) is not None:
        return False, False
    return True, tool.name == expected


async def run_mode(llm: OpenAICompatibleLLM, constrained: bool) -> list[Outcome]:
    schema = action_schema(TOOLS)
    abilities = {"json_schema": True, "json_schema_dialect": "llamacpp"}
    options: dict[str, Any] = {"max_tokens": MAX_TOKENS, **SAMPLING}
    if constrained:
        options["response_format"] = json_response_format(abilities, ACTION_FORMAT_NAME, schema)
    system = json_system_prompt(TOOLS.to_prompt_catalog())
    outcomes = []
    for question, expected in TASKS:
        started = time.perf_counter()
        reply = await llm.chat(
            [ChatMessage("system", system), ChatMessage("user", question)], **options
        )
        valid, correct = judge(reply.content, expected, schema)
        outcomes.append(Outcome(valid, correct, reply.content, time.perf_counter() - started))
    return outcomes


async def main(base_url: str, api_key: str | None, verbose: bool) -> None:
    llm = OpenAICompatibleLLM(base_url, api_key, "SmolLM2", timeout=300, max_retries=0)
    try:
        print(f"{len(TASKS)} JSON-mode agent turns, 3 tools, greedy decoding\n")
        for label, constrained in (("prompt-only", False), ("schema-constrained", True)):
            outcomes = await run_mode(llm, constrained)
            valid = sum(o.valid for o in outcomes)
            correct = sum(o.correct for o in outcomes)
            seconds = sum(o.seconds for o in outcomes) / len(outcomes)
            print(
                f"{label:>19}: {valid}/{len(outcomes)} valid, {correct}/{len(outcomes)} correct "
                f"tool calls, {seconds:.1f} s per turn"
            )
            if verbose:
                for outcome in outcomes:
                    mark = "ok " if outcome.correct else ("val" if outcome.valid else "BAD")
                    print(f"    {mark} {outcome.reply[:150]!r}")
    finally:
        await llm.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="an already running server (else one is started)")
    parser.add_argument("--api-key")
    parser.add_argument(
        "--chat-format",
        default=DEFAULT_CHAT_FORMAT,
        help=f"of the server this starts (default {DEFAULT_CHAT_FORMAT})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every reply")
    args = parser.parse_args()
    if args.base_url:
        asyncio.run(main(args.base_url, args.api_key, args.verbose))
    else:
        with tempfile.TemporaryDirectory() as state_dir:
            config = LocalServerConfig(
                state_dir=Path(state_dir), n_ctx=4096, chat_format=args.chat_format
            )
            server = LocalServer(config)
            info = server.ensure()
            try:
                asyncio.run(main(info.base_url, info.api_key, args.verbose))
            finally:
                server.stop()
