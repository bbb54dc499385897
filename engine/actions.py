"""JSON-mode actions: the reply schema a constrained model follows, and reading a reply.

A model without function calling answers each turn with one action: a JSON object
(``{"type": "tool_call", "reasoning", "tool_name", "tool_args"}`` or ``{"type":
"final_answer", "reasoning", "answer"}``, plus the shapes other frameworks taught models),
or the classic ``Thought: ... / Action: tool[input] / Finish[answer]`` text.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine import prompts
from engine.structured import extract_json
from engine.tools import Tool, ToolRegistry

__all__ = [
    "ACTION_FORMAT_NAME",
    "ACTION_REASONING_MAX_CHARS",
    "Action",
    "action_schema",
    "answer_start",
    "parse_action",
]

# The name of the response format that carries :func:`action_schema`.
ACTION_FORMAT_NAME = "agent_action"
# Schema-constrained JSON mode: the longest ``reasoning`` before the action.
ACTION_REASONING_MAX_CHARS = 300


@dataclass
class Action:
    """A parsed JSON-mode reply: ``tool_call``, ``final_answer`` or ``empty``."""

    kind: str
    reasoning: str = ""
    tool_name: str = ""
    tool_args: dict[str, Any] = field(default_factory=dict)
    answer: str = ""


def parse_action(content: str | None, tools: ToolRegistry) -> Action:
    """Read a JSON-mode reply: the JSON form first, then the classic text form.

    Anything else becomes a final answer carrying the parse-failure sentinel, which
    the loop turns into one reformat request.
    """
    text = (content or "").strip()
    if not text:
        return Action("empty")
    if "{" in text:
        try:
            data = extract_json(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            action = _action_from_json(data, tools)
            if action is not None:
                return action
    action = _action_from_classic(text, tools)
    if action is not None:
        return action
    return Action("final_answer", reasoning=prompts.PARSE_FAILURE_SENTINEL, answer=text)


def action_schema(tools: ToolRegistry | Sequence[str], *, reasoning: bool = True) -> dict[str, Any]:
    """The JSON schema of a JSON-mode reply, for models that support constrained output.

    ``properties`` lists every field with the tool names as an enum; ``anyOf`` then ties
    them into the two reply shapes: one variant per tool (``tool_name`` fixed, ``tool_args``
    that tool's parameter schema, both required) and the final answer (``answer``
    required). Grammar-constrained servers (llama.cpp) follow the variants, so even a tiny
    model names a listed tool and passes its required arguments; ``reasoning`` is bounded
    so a rambling model cannot spend its token budget before the action. Without
    ``reasoning`` (models marked small) the field is left out of both shapes.
    """
    registry = tools if isinstance(tools, ToolRegistry) else None
    names = registry.names() if registry is not None else list(tools)
    thought: dict[str, Any] = {"reasoning": {"type": "string"}} if reasoning else {}
    properties: dict[str, Any] = {
        "type": {"type": "string", "enum": ["tool_call", "final_answer"]},
        **thought,
        "answer": {"type": "string"},
    }
    if names:
        properties["tool_name"] = {"type": "string", "enum": list(names)}
        properties["tool_args"] = {"type": "object"}
    else:
        properties["type"]["enum"] = ["final_answer"]
    bounded = (
        {"reasoning": {"type": "string", "maxLength": ACTION_REASONING_MAX_CHARS}}
        if reasoning
        else {}
    )
    variants: list[dict[str, Any]] = []
    for name in names:
        found = registry.get(name) if registry is not None else None
        args = found.parameters if found is not None else {"type": "object"}
        variants.append(
            {
                "type": "object",
                "properties": {
                    "type": {"const": "tool_call"},
                    **bounded,
                    "tool_name": {"const": name},
                    "tool_args": args,
                },
                "required": ["type", *bounded, "tool_name", "tool_args"],
            }
        )
    variants.append(
        {
            "type": "object",
            "properties": {
                "type": {"const": "final_answer"},
                **bounded,
                "answer": {"type": "string"},
            },
            "required": ["type", *bounded, "answer"],
        }
    )
    return {
        "type": "object",
        "properties": properties,
        "required": ["type", *bounded],
        "anyOf": variants,
    }


FINAL_KINDS = frozenset({"final_answer", "final", "answer", "finish"})
# LangChain's shape: ``action`` names one of these, ``action_input`` is the answer.
FINAL_ACTIONS = frozenset({"final answer", "final_answer", "finish"})
_TOOL_KINDS = frozenset({"tool_call", "tool", "action", "function_call", "tool_use"})
_ARG_KEYS = ("tool_args", "tool_input", "arguments", "args", "parameters", "input")


def _action_from_json(data: dict[str, Any], tools: ToolRegistry) -> Action | None:
    """The JSON reply form (plus LangChain's ``action``/``action_input``); None if neither."""
    reasoning = _text(data.get("reasoning") or data.get("thought") or "")
    kind = _text(data.get("type") or "").strip().lower()
    name = data.get("tool_name") or data.get("tool") or data.get("name")
    answer = data.get("answer", data.get("final_answer"))
    if not kind and "action" in data and "action_input" in data:
        name, args = _text(data["action"]), data["action_input"]
        if name.strip().lower() in FINAL_ACTIONS:
            return _final(reasoning, args)
        return Action("tool_call", reasoning, name.strip(), _coerce_args(args, tools.get(name)))
    if kind in FINAL_KINDS or (not kind and answer is not None and not name):
        return _final(reasoning, answer)
    if (kind in _TOOL_KINDS or not kind) and isinstance(name, str) and name.strip():
        args = next((data[key] for key in _ARG_KEYS if key in data), None)
        tool_name = name.strip()
        return Action("tool_call", reasoning, tool_name, _coerce_args(args, tools.get(tool_name)))
    return None


# What no answer starts with: closing JSON punctuation a small model spills from its action
# into the answer ("}\nThe answer is 391."). Whitespace goes with it.
_STRAY_START = re.compile(r"[\s}\],]+")


def answer_start(text: str) -> str:
    """``text`` without what may not begin an answer (whitespace, stray punctuation)."""
    stray = _STRAY_START.match(text)
    return text[stray.end() :] if stray else text


def _final(reasoning: str, answer: Any) -> Action:
    text = answer_start(_text(answer)).rstrip() if answer is not None else ""
    if not text:
        return Action("empty", reasoning)
    return Action("final_answer", reasoning, answer=text)


_THOUGHT_RE = re.compile(
    r"Thought\s*:\s*(.*?)(?=\n\s*(?:Action|Finish|Final Answer)\b|\Z)", re.S | re.I
)
_ACTION_RE = re.compile(r"Action\s*:\s*([A-Za-z0-9_-]+)\s*\[", re.I)
_FINISH_RE = re.compile(r"(?:^|\n|\s)Finish\s*\[", re.I)
_FINAL_ANSWER_RE = re.compile(r"Final Answer\s*:\s*(.*)", re.S | re.I)
_OBSERVATION_RE = re.compile(r"\n\s*Observation\s*:", re.I)


def _action_from_classic(text: str, tools: ToolRegistry) -> Action | None:
    """``Thought: ... / Action: tool[input]`` and ``Finish[answer]`` / ``Final Answer:``."""
    cut = _OBSERVATION_RE.search(text)
    if cut:
        text = text[: cut.start()]  # ignore observations the model invented
    thought = _THOUGHT_RE.search(text)
    reasoning = thought.group(1).strip() if thought else ""
    action = _ACTION_RE.search(text)
    if action is not None:
        name = action.group(1)
        arg_text = _bracket_body(text, action.end() - 1)
        if name.lower() == "finish":
            return _final(reasoning, arg_text)
        return Action("tool_call", reasoning, name, _coerce_args(arg_text, tools.get(name)))
    finish = _FINISH_RE.search(text)
    if finish is not None:
        return _final(reasoning, _bracket_body(text, finish.end() - 1))
    final = _FINAL_ANSWER_RE.search(text)
    if final is not None:
        return _final(reasoning, final.group(1))
    return None


def _bracket_body(text: str, open_index: int) -> str:
    """Text between ``text[open_index] == "["`` and its closing bracket (or the last ``]``)."""
    depth = 0
    for i in range(open_index, len(text)):
        if text[i] == "[":
            depth += 1
        elif text[i] == "]":
            depth -= 1
            if depth == 0:
                return text[open_index + 1 : i].strip()
    end = text.rfind("]")
    return text[open_index + 1 : end if end > open_index else len(text)].strip()


def _coerce_args(args: Any, tool: Tool | None) -> dict[str, Any]:
    """Arguments as a dict: JSON objects as is, a bare value mapped to the main parameter."""
    if args is None or args == "":
        return {}
    if isinstance(args, dict):
        return args
    if isinstance(args, str) and args.strip().startswith("{"):
        try:
            parsed = extract_json(args)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return _single_argument(args, tool)


def _single_argument(value: Any, tool: Tool | None) -> dict[str, Any]:
    properties = (tool.parameters.get("properties") or {}) if tool is not None else {}
    if not properties:
        return {"input": value}
    required = (tool.parameters.get("required") or []) if tool is not None else []
    name = required[0] if required else next(iter(properties))
    kind = (properties.get(name) or {}).get("type")
    if isinstance(value, str):
        text = value.strip().strip("\"'")
        with contextlib.suppress(ValueError):
            if kind == "integer":
                return {name: int(text)}
            if kind == "number":
                return {name: float(text)}
        value = text
    return {name: value}


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)
