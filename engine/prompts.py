"""Every text the engine sends to a model, in one place so wording is reviewed together.

Tests assert on several of these verbatim (interrupt texts, the reminder, the fallback
answer), so change them here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from engine.outcomes import Step
from engine.tools import ToolExample

__all__ = [
    "CUT_TOOL_CALL",
    "EMPTY_TURN_REMINDER",
    "INTERRUPT_PREFIX",
    "JSON_REFORMAT_REQUEST",
    "PARSE_FAILURE_SENTINEL",
    "SELECTION_SYSTEM_PROMPT",
    "SYNTHESIS_SYSTEM_PROMPT",
    "SystemPrompt",
    "current_system_prompt",
    "format_interrupt",
    "json_system_prompt",
    "max_iterations_answer",
    "native_system_prompt",
    "no_progress_message",
    "repeated_call_warning",
    "repeated_error_message",
    "selection_user_prompt",
    "small_json_system_prompt",
    "small_model_answer",
    "synthesis_user_prompt",
]

# What an agent is told besides the engine's own rules: a text, or a function called
# before every LLM call, for a prompt with parts that change while a run goes on (the
# time of day, the tools on offer).
SystemPrompt: TypeAlias = str | Callable[[], str] | None


def current_system_prompt(system_prompt: SystemPrompt) -> str | None:
    """The text of ``system_prompt`` now."""
    return system_prompt() if callable(system_prompt) else system_prompt


PARSE_FAILURE_SENTINEL = "(could not parse LLM output as JSON)"
INTERRUPT_PREFIX = "[USER INTERRUPT]"
EMPTY_TURN_REMINDER = "You must call a tool or give the final answer."
OBSERVATION_PREFIX = "Observation: "
CUT_TOOL_CALL = (
    "Your tool call was cut off at your output limit before its arguments were complete, "
    "so it was not run. Make the call again with shorter arguments, or answer without it."
)
OBSERVATION_CUT_CHARS = 2_000

JSON_REFORMAT_REQUEST = (
    "Your previous response could not be parsed as valid JSON. Reply with ONLY a JSON object "
    "in one of the two formats described in the system prompt, no markdown fences."
)

_COMMON_RULES = """\
- If a tool returns an error, read it and fix the arguments or try another approach; never \
repeat a call with exactly the same arguments.
- Messages starting with [USER INTERRUPT] are follow-ups the user sent while you were \
working: take them into account before you finish.
- Keep working until the task is done, then answer in the language of the user."""

_JSON_PROMPT = """\
You are a capable assistant that solves the user's task step by step, calling tools when \
they help.

## Tools
{catalog}

## How to reply
Reply with exactly ONE JSON object and nothing else: no markdown fences, no text around it.

To call a tool:
{{"type": "tool_call", "reasoning": "<why this step, briefly>", "tool_name": "<a tool name \
from the list>", "tool_args": {{<arguments matching the tool's parameters>}}}}

When you have enough information to answer:
{{"type": "final_answer", "reasoning": "<briefly, how you know>", "answer": "<the answer \
the user reads: direct, in Markdown where it helps>"}}

## Rules
- Call one tool per reply. Its result comes back in a message starting with "Observation: ".
- Use only the tools listed above, with arguments that match their JSON schema.
{rules}"""

_NATIVE_PROMPT = """\
You are a capable assistant that solves the user's task step by step, calling the provided \
tools when they help.

## Rules
- Call several tools at once when the calls are independent of each other.
- When you have enough information, reply without calling a tool: that reply is the answer \
the user reads. Give it directly, in Markdown where it helps (headings, lists, tables, code \
blocks), without mentioning tools or steps.
{rules}"""

# Models marked small (the bundled 135M model): a short prompt, replies without a
# ``reasoning`` field (their reasoning is noise that costs seconds a turn), and worked
# examples, which they imitate far better than they follow rules.
_SMALL_JSON_PROMPT = """\
You are a helpful assistant. Tools you can call:
{catalog}

Reply with one JSON object.
To call a tool: {{"type": "tool_call", "tool_name": "<tool>", "tool_args": {{...}}}}
To answer: {{"type": "final_answer", "answer": "<your answer>"}}
Use a tool only when the question needs it; the tool's result is then the answer. \
Never make up a result.

Examples:
{examples}"""

# Always shown to small models: a question that needs no tool.
_SMALL_NO_TOOL_EXAMPLE = (
    "User: What is the largest planet in the solar system?",
    '{"type": "final_answer", "answer": "Jupiter is the largest planet."}',
)

SYNTHESIS_SYSTEM_PROMPT = """\
You write the final answer to the user's question from the work already done: the \
question, the tools that were called and what they returned.

- Present the results directly, as the answer itself. No meta-commentary: do not mention \
tools, steps, traces, observations or "the information provided".
- Use Markdown where it helps: headings, lists, tables, code blocks, links from the results.
- Use only facts supported by the results; if something could not be found or a tool \
failed, say briefly what is missing.
- Be complete but concise.
- Answer in the same language as the user's question."""

SELECTION_SYSTEM_PROMPT = """\
You choose which tools an assistant will need for a task. Pick the tools most likely to \
be useful, at most {max_tools}. Reply with a JSON object: {{"tools": ["tool_name", ...]}}."""


def _with_extra(prompt: str, extra: str | None) -> str:
    """The caller's own instructions (persona, date, house rules) come first."""
    return f"{extra.strip()}\n\n{prompt}" if extra and extra.strip() else prompt


def json_system_prompt(catalog: str, extra: str | None = None) -> str:
    """JSON mode: the catalog and both reply formats live in the system prompt."""
    catalog = catalog or "(no tools are available: give the final answer directly)"
    return _with_extra(_JSON_PROMPT.format(catalog=catalog, rules=_COMMON_RULES), extra)


def small_json_system_prompt(
    catalog: str, examples: Sequence[tuple[str, ToolExample]], extra: str | None = None
) -> str:
    """JSON mode for models marked small: a one-line catalog and worked examples
    (``(tool name, example)`` pairs, see ``ToolRegistry.examples``): each tool's request
    and call, then a question that needs no tool. No example result or answer is shown:
    a small model copies them into answers ("09:30 on Monday" for any city)."""
    blocks = []
    for name, example in examples:
        call = {"type": "tool_call", "tool_name": name, "tool_args": example.arguments}
        blocks.append(f"User: {example.request}\n{json.dumps(call)}")
    blocks.append("\n".join(_SMALL_NO_TOOL_EXAMPLE))
    catalog = catalog or "(none: answer directly)"
    prompt = _SMALL_JSON_PROMPT.format(catalog=catalog, examples="\n\n".join(blocks))
    return _with_extra(prompt, extra)


def small_model_answer(step: Step) -> str:
    """What a small model's run answers after its tool call: the result, or the failure."""
    if step.error is None:
        return step.observation
    return f"The {step.tool_name} tool could not answer this: {step.error}"


def native_system_prompt(extra: str | None = None) -> str:
    """Native mode: the tools travel in the request's ``tools`` field."""
    return _with_extra(_NATIVE_PROMPT.format(rules=_COMMON_RULES), extra)


def format_interrupt(texts: Sequence[str]) -> str:
    """One pinned user message for everything drained at once."""
    if len(texts) == 1:
        return (
            f"{INTERRUPT_PREFIX}: {texts[0]}\n\n"
            "The user sent this while you were working. Acknowledge it and adjust your work "
            "accordingly."
        )
    items = "\n".join(f"{n}. {text}" for n, text in enumerate(texts, 1))
    return (
        f"{INTERRUPT_PREFIX}: The user sent {len(texts)} messages while you were working:\n"
        f"{items}\n\nAddress all of them and adjust your work accordingly."
    )


def repeated_call_warning(tool_name: str) -> str:
    return (
        f"You are repeating yourself: you already called '{tool_name}' with exactly these "
        "arguments twice in a row, so it was not run again. Use the result you already "
        "have, change the arguments, try another tool, or give the final answer."
    )


def repeated_error_message(signature: str, count: int) -> str:
    return (
        f"I stopped because the same error occurred {count} times: {signature}. "
        "Check the request or the tool's configuration, then ask me to continue."
    )


def no_progress_message(turns: int) -> str:
    return (
        f"I stopped because the model replied {turns} times in a row without calling a tool "
        "or giving an answer. Ask me to continue to try again."
    )


def max_iterations_answer(max_iterations: int, outcomes: Sequence[tuple[str, str | None]]) -> str:
    """The fallback answer: what ran and how each call ended."""
    lines = [f"I could not complete the task within {max_iterations} iterations."]
    if outcomes:
        lines.append("Steps taken:")
        lines.extend(
            f"- called {name} -> {'OK' if error is None else f'ERROR: {error}'}"
            for name, error in outcomes
        )
    else:
        lines.append("No tools were called.")
    return "\n".join(lines)


def synthesis_user_prompt(
    query: str, trace: Sequence[tuple[str, dict[str, Any], str]], findings: str
) -> str:
    """The question plus the trace, each tool result cut to 2,000 characters."""
    parts = [f"## Question\n{query}", "## Work done"]
    if not trace:
        parts.append("No tools were called.")
    for n, (name, args, observation) in enumerate(trace, 1):
        shown = observation[:OBSERVATION_CUT_CHARS]
        if len(observation) > OBSERVATION_CUT_CHARS:
            shown += "\n[... result cut]"
        args_text = json.dumps(args, ensure_ascii=False, default=str)
        parts.append(f"### Step {n}: {name}({args_text})\n{shown}")
    if findings:
        parts.append(f"## Findings summary\n{findings}")
    parts.append("Write the final answer to the question.")
    return "\n\n".join(parts)


def selection_user_prompt(query: str, catalog: str, max_tools: int) -> str:
    return (
        f"Task:\n{query}\n\nAvailable tools:\n{catalog}\n\n"
        f"Which tools (at most {max_tools}) will be needed? Reply with "
        '{"tools": [...]} using exact tool names.'
    )
