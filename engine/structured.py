"""Structured output from any model: a chain of levels chosen by the model's abilities.

Weak and local models break JSON in every way imaginable, and strong models sometimes
reject forced ``tool_choice``. :func:`structured_llm_call` therefore tries, in order,
``native_fc`` (a forced virtual function, no retry), ``json_mode`` (``response_format``,
one reformat retry) and ``plain_text`` (:func:`extract_json`, then a regex fallback, one
reformat retry). Any exception or unusable value falls through to the next level; worst
case 5 / 4 / 2 calls for tool_call+json / json only / plain models.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import json_repair
import jsonschema

from engine.cancel import CancelledRun, CancelToken, run_cancellable
from engine.errors import EngineError, ScriptExhaustedError
from engine.llm.base import LLM, ChatResponse
from engine.messages import ChatMessage, Usage

__all__ = [
    "LEVEL_DEFAULT",
    "LEVEL_JSON_MODE",
    "LEVEL_NATIVE_FC",
    "LEVEL_PLAIN_TEXT",
    "REFORMAT_PROMPT",
    "StructuredCallResult",
    "StructuredOutputError",
    "extract_json",
    "json_response_format",
    "structured_llm_call",
]

logger = logging.getLogger(__name__)

LEVEL_NATIVE_FC = "native_fc"
LEVEL_JSON_MODE = "json_mode"
LEVEL_PLAIN_TEXT = "plain_text"
LEVEL_DEFAULT = "default"

REFORMAT_PROMPT = (
    "Your previous response could not be parsed as valid JSON. Reply with ONLY a JSON object "
    "matching the schema, no markdown fences."
)
SCHEMA_INSTRUCTION = (
    "Respond with ONLY a JSON object that matches this JSON schema, with no markdown fences "
    "and no text before or after it:\n{schema}"
)


class _Unset:
    def __repr__(self) -> str:
        return "<unset>"


_UNSET: Any = _Unset()


class StructuredOutputError(EngineError, ValueError):
    """Every level failed and no ``default_value`` was given."""


@dataclass
class StructuredCallResult:
    value: Any
    raw_data: Any
    level_used: str
    llm_calls: int
    total_usage: Usage = field(default_factory=Usage)


# --------------------------------------------------------------------------- extract_json

_FENCE_RE = re.compile(r"```[ \t]*(?:json5?|JSON)?[ \t]*\r?\n?(.*?)```", re.DOTALL)
_VALID_ESCAPES = frozenset('"\\/bfnrtu')
_MAX_SCAN_STARTS = 25


def extract_json(text: str) -> dict[str, Any] | list[Any]:
    """The first JSON object (or array) in ``text``, however the model mangled it.

    Order: direct parse; parse after escaping stray backslashes and raw control
    characters inside strings; fenced blocks; the first balanced ``{...}`` then
    ``[...]`` (string-aware); finally ``json_repair``. Only objects and arrays count:
    a bare scalar is not structured output. Raises ``ValueError`` when nothing works.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    stripped = text.strip().lstrip("\ufeff")
    if not stripped:
        raise ValueError("no JSON found in an empty reply")
    value = _parse_strict(stripped)
    if value is not None:
        return value
    for block in _FENCE_RE.findall(stripped):
        value = _parse_strict(block.strip())
        if value is None:
            value = _first_balanced(block)
        if value is not None:
            return value
    value = _first_balanced(stripped)
    if value is not None:
        return value
    return _repair(stripped)


def _parse_strict(text: str) -> dict[str, Any] | list[Any] | None:
    """Direct parse, then parse with string contents escaped; None when neither works."""
    if not text or text[0] not in "{[":
        return None
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = json.loads(_escape_inside_strings(text))
        except ValueError:
            return None
    return value if isinstance(value, dict | list) else None


def _escape_inside_strings(text: str) -> str:
    """Escape what models forget to: lone backslashes and raw newlines/tabs in strings."""
    out: list[str] = []
    in_string = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if not in_string:
            in_string = ch == '"'
            out.append(ch)
        elif ch == "\\":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt in _VALID_ESCAPES and nxt:
                out.append(ch + nxt)
                i += 1
            else:
                out.append("\\\\")
        elif ch == '"':
            in_string = False
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def _first_balanced(text: str) -> dict[str, Any] | list[Any] | None:
    """The first balanced ``{...}`` that parses, else the first such ``[...]``."""
    for opener, closer in (("{", "}"), ("[", "]")):
        start = text.find(opener)
        tries = 0
        while start != -1 and tries < _MAX_SCAN_STARTS:
            tries += 1
            end = _balanced_end(text, start, opener, closer)
            if end is not None:
                value = _parse_strict(text[start : end + 1])
                if value is not None:
                    return value
            start = text.find(opener, start + 1)
    return None


def _balanced_end(text: str, start: int, opener: str, closer: str) -> int | None:
    """Index of the bracket closing ``text[start]``, ignoring brackets inside strings."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == opener:
            depth += 1
        elif ch == closer:
            depth -= 1
            if depth == 0:
                return i
    return None


def _repair(text: str) -> dict[str, Any] | list[Any]:
    """Last resort: json_repair from the first bracket on (trailing commas, quotes...)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i != -1]
    if not starts:
        raise ValueError("no JSON object or array found in the reply")
    try:
        value = json_repair.loads(text[min(starts) :])
    except Exception as exc:  # the library's own failure modes are not documented
        raise ValueError(f"could not repair JSON: {exc}") from exc
    if isinstance(value, dict | list) and value:
        return value
    raise ValueError("no JSON object or array found in the reply")


# --------------------------------------------------------------------------- levels


def json_response_format(
    abilities: dict[str, Any], name: str, schema: dict[str, Any] | None
) -> dict[str, Any]:
    """``response_format`` for a JSON-mode call, schema-constrained when the model can.

    Dialects: ``openai`` (``json_schema`` wrapper, also vLLM) and ``llamacpp``
    (``json_object`` with an inline ``schema``).
    """
    if schema is None or not abilities.get("json_schema"):
        return {"type": "json_object"}
    if abilities.get("json_schema_dialect", "openai") == "llamacpp":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}


class _LevelFailed(Exception):
    """This attempt produced nothing usable; try again or move to the next level."""


@dataclass
class _Call:
    """Shared state of one structured call across its levels."""

    llm: LLM
    schema: dict[str, Any]
    function_name: str
    parse_fn: Callable[[Any], Any] | None
    regex_fallback: Callable[[str], Any] | None
    cancel: CancelToken | None
    validator: Any = None
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    last_error: BaseException | None = None

    async def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls += 1
        response = await run_cancellable(self.llm.chat(messages, **kwargs), self.cancel)
        self.usage = self.usage + response.usage
        return response

    def accept(self, raw: Any) -> tuple[Any, Any]:
        """Validate ``raw`` against the schema and run ``parse_fn``; raise if unusable."""
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(raw))
        if error is not None:
            raise _LevelFailed(f"schema violation: {error.message}")
        if self.parse_fn is None:
            return raw, raw
        value = self.parse_fn(raw)
        if value is None:
            raise _LevelFailed("parse_fn returned None")
        return value, raw


async def structured_llm_call(
    llm: LLM,
    messages: Sequence[ChatMessage],
    schema: dict[str, Any],
    function_name: str,
    *,
    parse_fn: Callable[[Any], Any] | None = None,
    regex_fallback: Callable[[str], Any] | None = None,
    default_value: Any = _UNSET,
    description: str | None = None,
    cancel: CancelToken | None = None,
) -> StructuredCallResult:
    """Get a value matching ``schema`` from ``llm``, degrading level by level.

    ``parse_fn(raw) -> value`` turns the validated data into the caller's value (None or
    an exception = failure). ``regex_fallback(text) -> raw | None`` is the plain-text
    level's last resort, its result treated like parsed JSON. When every level fails,
    ``default_value`` is returned (``level_used="default"``) or
    :class:`StructuredOutputError` raised. Cancellation propagates as ``CancelledRun``.
    """
    state = _Call(
        llm=llm,
        schema=schema,
        function_name=function_name,
        parse_fn=parse_fn,
        regex_fallback=regex_fallback,
        cancel=cancel,
        validator=jsonschema.Draft202012Validator(schema),
    )
    abilities = llm.abilities
    levels: list[tuple[str, Any]] = []
    if abilities.get("tool_call") and abilities.get("tool_choice") is not False:
        levels.append((LEVEL_NATIVE_FC, _native_level))
    if abilities.get("json_mode") or abilities.get("json_schema"):
        levels.append((LEVEL_JSON_MODE, _json_level))
    levels.append((LEVEL_PLAIN_TEXT, _plain_level))

    base = list(messages)
    for level, run_level in levels:
        try:
            value, raw = await run_level(state, base, description)
        except (CancelledRun, ScriptExhaustedError):
            raise  # a stop request, or a test script that is too short: never a "level failure"
        except Exception as exc:
            state.last_error = exc
            logger.info("structured call %s: level %s failed: %s", function_name, level, exc)
            continue
        return StructuredCallResult(value, raw, level, state.calls, state.usage)

    if default_value is not _UNSET:
        return StructuredCallResult(default_value, None, LEVEL_DEFAULT, state.calls, state.usage)
    raise StructuredOutputError(
        f"structured call {function_name!r} failed at every level after {state.calls} "
        f"LLM call(s): {state.last_error}"
    ) from state.last_error


async def _native_level(
    state: _Call, messages: list[ChatMessage], description: str | None
) -> tuple[Any, Any]:
    """Force the virtual function; read its arguments (or JSON in the content). No retry."""
    tool = {
        "type": "function",
        "function": {
            "name": state.function_name,
            "description": description or f"Return the result as {state.function_name}.",
            "parameters": state.schema,
        },
    }
    response = await state.chat(
        messages,
        tools=[tool],
        tool_choice={"type": "function", "function": {"name": state.function_name}},
    )
    call = next(
        (c for c in response.tool_calls if c.name == state.function_name),
        response.tool_calls[0] if response.tool_calls else None,
    )
    raw = call.arguments if call is not None else extract_json(response.content)
    return state.accept(raw)


async def _json_level(
    state: _Call, messages: list[ChatMessage], description: str | None
) -> tuple[Any, Any]:
    """``response_format`` JSON, constrained by the schema when the model supports it."""
    response_format = json_response_format(state.llm.abilities, state.function_name, state.schema)
    return await _text_level(state, messages, description, response_format=response_format)


async def _plain_level(
    state: _Call, messages: list[ChatMessage], description: str | None
) -> tuple[Any, Any]:
    return await _text_level(state, messages, description, response_format=None)


async def _text_level(
    state: _Call,
    messages: list[ChatMessage],
    description: str | None,
    *,
    response_format: dict[str, Any] | None,
) -> tuple[Any, Any]:
    """One attempt plus one reformat retry; an exception ends the level at once."""
    prompt = _with_schema_instruction(messages, state.schema, description)
    kwargs: dict[str, Any] = {}
    if response_format is not None:
        kwargs["response_format"] = response_format
    response = await state.chat(prompt, **kwargs)
    try:
        return _accept_text(state, response.content, use_regex=response_format is None)
    except Exception as exc:
        logger.debug("structured call %s: reformat after: %s", state.function_name, exc)
    retry = [
        *prompt,
        ChatMessage("assistant", response.content or ""),
        ChatMessage("user", REFORMAT_PROMPT),
    ]
    response = await state.chat(retry, **kwargs)
    return _accept_text(state, response.content, use_regex=response_format is None)


def _accept_text(state: _Call, text: str, *, use_regex: bool) -> tuple[Any, Any]:
    try:
        raw = extract_json(text)
    except ValueError:
        if not (use_regex and state.regex_fallback is not None):
            raise
        raw = state.regex_fallback(text or "")
        if raw is None:
            raise _LevelFailed("no JSON and the regex fallback found nothing") from None
    return state.accept(raw)


def _with_schema_instruction(
    messages: list[ChatMessage], schema: dict[str, Any], description: str | None
) -> list[ChatMessage]:
    """Put the schema into the (first) system message: some chat templates reject a
    system message anywhere but first."""
    instruction = SCHEMA_INSTRUCTION.format(schema=json.dumps(schema, ensure_ascii=False))
    if description:
        instruction = f"{description}\n\n{instruction}"
    if messages and messages[0].role == "system":
        first = messages[0]
        merged = ChatMessage(
            "system", f"{first.text()}\n\n{instruction}".strip(), pinned=first.pinned
        )
        return [merged, *messages[1:]]
    return [ChatMessage("system", instruction), *messages]
