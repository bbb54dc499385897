"""Tools the agent can call, and the registry that hands them to an LLM.

A :class:`Tool` wraps a sync or async callable taking its JSON arguments as keywords.
Arguments are validated against the tool's JSON schema before the call; any failure is
returned as a :class:`ToolResult` with ``is_error`` set, never raised into the loop.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from engine.approval import ALWAYS_REASON

__all__ = [
    "Artifact",
    "Tool",
    "ToolRegistry",
    "ToolExample",
    "ToolResult",
    "compact_description",
    "tool",
]

DEFAULT_TOOL_TIMEOUT = 60.0
COMPACT_DESCRIPTION_CHARS = 80


@dataclass
class Artifact:
    """A file a tool produced (HTML/markdown preview, an image, a CSV...)."""

    name: str
    mime_type: str
    size: int
    path: str | None = None
    content: bytes | None = None


@dataclass
class ToolResult:
    """What a tool returns. Plain strings returned by tool functions are wrapped in this."""

    content: str
    content_type: str = "text"  # text | html | markdown | json
    artifacts: list[Artifact] = field(default_factory=list)
    is_error: bool = False

    def observation(self) -> str:
        """The text the model sees; artifacts are summarised, never inlined."""
        if self.artifacts and self.content_type in {"html", "markdown"}:
            names = ", ".join(a.name for a in self.artifacts)
            return (
                f"[Artifact generated: {names}] The content is rendered as a preview in the UI "
                "and can be downloaded; do not repeat its source."
            )
        if self.artifacts:
            names = ", ".join(a.name for a in self.artifacts)
            return f"{self.content}\n[Artifact generated: {names}]"
        return self.content


@functools.lru_cache(maxsize=1024)
def _validator_for(schema_json: str) -> jsonschema.Draft202012Validator:
    """Checked once per distinct schema: tools are rebuilt for every run, and checking a
    schema against the metaschema is slow."""
    schema = json.loads(schema_json)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@dataclass(frozen=True)
class ToolExample:
    """A request and the call that serves it: small models copy the shape of a
    demonstration far better than they follow a JSON schema."""

    request: str
    arguments: dict[str, Any]


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    timeout: float = DEFAULT_TOOL_TIMEOUT
    requires_confirmation: bool = False  # every call waits for the user's approval
    # Per call: why this call needs approval (e.g. a non-GET request), or None.
    confirm_if: Callable[[dict[str, Any]], str | None] | None = None
    # What a call would send, for the user who approves it (call_preview).
    preview: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    examples: tuple[ToolExample, ...] = ()  # shown to models marked small (engine.prompts)

    def confirmation_reason(self, arguments: dict[str, Any]) -> str | None:
        """Why this call must wait for the user's approval, or None if it need not."""
        if self.confirm_if is not None:
            reason = self.confirm_if(arguments)
            if reason:
                return reason
        return ALWAYS_REASON if self.requires_confirmation else None

    def call_preview(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """What this call would send, shown on its approval card so that the user approves
        the concrete request, not a template: e.g. ``{"method", "url", "body",
        "credentials"}`` (credentials by name, never their values). {} when the tool has
        no preview or it fails (the card then shows the arguments only)."""
        if self.preview is None:
            return {}
        try:
            return dict(self.preview(arguments))
        except Exception:  # a preview must never stop the question being asked
            return {}

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"invalid tool name {self.name!r}: use letters, digits, _ and -")
        self._validator = _validator_for(json.dumps(self.parameters, sort_keys=True))

    def validation_error(self, arguments: dict[str, Any]) -> str | None:
        """A readable message for the first schema violation, or None when valid."""
        if not isinstance(arguments, dict):
            return f"arguments must be a JSON object, got {type(arguments).__name__}"
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is None:
            return None
        where = "/".join(str(p) for p in error.absolute_path)
        return f"{where + ': ' if where else ''}{error.message}"

    async def invoke(self, arguments: dict[str, Any]) -> ToolResult:
        """Validate, call (in a thread when sync), enforce the timeout, wrap the result.

        Raises on failure so the caller can classify the error; the agent turns it into
        an error observation.
        """
        problem = self.validation_error(arguments)
        if problem is not None:
            raise ToolArgumentError(f"Invalid arguments for tool '{self.name}': {problem}")
        if inspect.iscoroutinefunction(self.func):
            call = self.func(**arguments)
        else:
            call = asyncio.to_thread(functools.partial(self.func, **arguments))
        try:
            value = await asyncio.wait_for(call, timeout=self.timeout)
        except TimeoutError as exc:
            raise ToolTimeoutError(
                f"Tool '{self.name}' timed out after {self.timeout:g} s"
            ) from exc
        return as_tool_result(value)

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolArgumentError(ValueError):
    """The model's arguments do not match the tool's schema."""


class ToolTimeoutError(TimeoutError):
    """The tool ran longer than its timeout."""


def as_tool_result(value: Any) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if value is None:
        return ToolResult("")
    if isinstance(value, str):
        return ToolResult(value)
    try:
        return ToolResult(json.dumps(value, ensure_ascii=False, default=str), "json")
    except (TypeError, ValueError):
        return ToolResult(str(value))


def compact_description(description: str, limit: int = COMPACT_DESCRIPTION_CHARS) -> str:
    """One line, at most ``limit`` characters (``limit - 3`` + "...")."""
    flat = " ".join(description.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _what(parameter: dict[str, Any]) -> str:
    return str(parameter.get("description") or parameter.get("type") or "")


class ToolRegistry:
    """An ordered set of tools with the catalog forms each agent mode needs."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools:
            self.register(item)

    def register(self, item: Tool) -> Tool:
        if item.name in self._tools:
            raise ValueError(f"tool {item.name!r} is already registered")
        self._tools[item.name] = item
        return item

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def copy(self) -> ToolRegistry:
        return ToolRegistry(self._tools.values())

    def filter_by_names(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry with only the known names, in registry order."""
        wanted = set(names)
        return ToolRegistry(t for t in self._tools.values() if t.name in wanted)

    def to_openai_tools(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self._tools.values()]

    def to_prompt_catalog(self) -> str:
        """Full catalog for JSON mode's system prompt: name, description, parameters."""
        blocks = []
        for t in self._tools.values():
            params = json.dumps(t.parameters, ensure_ascii=False)
            blocks.append(f"- {t.name}: {t.description}\n  parameters (JSON schema): {params}")
        return "\n".join(blocks)

    def to_small_catalog(self) -> str:
        """One line per tool for small models: name, description, and each argument with
        its description; a full JSON schema is noise to them (the grammar enforces it)."""
        lines = []
        for t in self._tools.values():
            properties = t.parameters.get("properties") or {}
            args = ", ".join(
                f'"{name}": {compact_description(_what(spec), 70)}'
                for name, spec in properties.items()
            )
            lines.append(f"- {t.name}: {compact_description(t.description)} Arguments: {{{args}}}")
        return "\n".join(lines)

    def examples(self) -> list[tuple[str, ToolExample]]:
        """(tool name, example) of every tool's examples, in registry order."""
        return [(t.name, example) for t in self._tools.values() for example in t.examples]

    def to_compact_catalog(self) -> str:
        """One short line per tool, no schemas: the input of the tool-selection call."""
        return "\n".join(
            f"- {t.name}: {compact_description(t.description)}" for t in self._tools.values()
        )


_JSON_TYPES: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
}


def _schema_for(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        non_null = [a for a in args if a is not type(None)]
        if len(non_null) == 1:
            return _schema_for(non_null[0])
        return {"anyOf": [_schema_for(a) for a in non_null]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = _schema_for(args[0])
        return schema
    if origin is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    return {}


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    timeout: float = DEFAULT_TOOL_TIMEOUT,
    requires_confirmation: bool = False,
) -> Callable[[Callable[..., Any]], Tool]:
    """Build a :class:`Tool` from a function's type hints and docstring.

    Parameters without defaults become ``required``; ``Annotated[T, "text"]`` adds a
    description to the parameter.
    """

    def decorate(func: Callable[..., Any]) -> Tool:
        hints = typing.get_type_hints(func, include_extras=True)
        properties: dict[str, Any] = {}
        required: list[str] = []
        for param in inspect.signature(func).parameters.values():
            annotation = hints.get(param.name, Any)
            doc = None
            if typing.get_origin(annotation) is typing.Annotated:
                annotation, *meta = typing.get_args(annotation)
                doc = next((m for m in meta if isinstance(m, str)), None)
            prop = _schema_for(annotation)
            if doc:
                prop["description"] = doc
            if param.default is inspect.Parameter.empty:
                required.append(param.name)
            elif param.default is not None:
                prop["default"] = param.default
            properties[param.name] = prop
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        return Tool(
            name=name or func.__name__,
            description=description or inspect.getdoc(func) or func.__name__,
            parameters=schema,
            func=func,
            timeout=timeout,
            requires_confirmation=requires_confirmation,
        )

    return decorate
