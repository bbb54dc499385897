"""Chat messages exchanged between the engine and LLM providers.

Kept as plain dataclasses so the web layer can map database rows onto them without the
engine knowing anything about Django. ``to_dict``/``from_dict`` give them a JSON form, so
an application can store a run's trace (a paused run's, to resume it later) and hand it
back exactly as the model saw it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatMessage", "ToolCall", "Usage"]

_ROLES = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True)
class Usage:
    """Token accounting for one or more LLM calls; ``a + b`` sums them."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            estimated=self.estimated or other.estimated,
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, estimated: bool = False) -> Usage:
        data = data or {}
        prompt = int(data.get("prompt_tokens") or 0)
        completion = int(data.get("completion_tokens") or 0)
        total = int(data.get("total_tokens") or (prompt + completion))
        return cls(prompt, completion, total, estimated)


@dataclass(frozen=True)
class ToolCall:
    """A function call requested by the model; ``arguments`` is already decoded."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": json.dumps(self.arguments)},
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``from_dict`` reads it back)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Any) -> ToolCall:
        """A call from :meth:`to_dict`'s form; ``ValueError`` when it is not one."""
        if not isinstance(data, dict):
            raise ValueError(f"a tool call must be an object, not {type(data).__name__}")
        call_id, name = data.get("id", ""), data.get("name")
        arguments = data.get("arguments", {})
        if not isinstance(name, str) or not name:
            raise ValueError("a tool call needs a name")
        if not isinstance(call_id, str):
            raise ValueError("a tool call's id must be a string")
        if not isinstance(arguments, dict):
            raise ValueError("a tool call's arguments must be an object")
        return cls(call_id, name, arguments)


@dataclass
class ChatMessage:
    """One message of a conversation as the engine sees it.

    ``pinned`` messages survive context compaction verbatim; ``reasoning`` carries a
    model's separate reasoning channel (DeepSeek R1 style) and is never sent back.
    """

    role: str
    content: str | list[dict[str, Any]] | None = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    pinned: bool = False
    reasoning: str | None = None
    name: str | None = None

    def text(self) -> str:
        """The textual content, flattening multi-part (vision) content."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(
            part.get("text", "") for part in self.content if part.get("type") == "text"
        )

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI chat-completions wire form.

        Assistant messages that carry tool calls send ``content: ""`` rather than null,
        because several servers (llama.cpp among them) reject null content.
        """
        data: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            data["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.name and self.role == "tool":
            data["name"] = self.name
        return data

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, every field kept (``from_dict`` reads it back); fields at
        their default are left out to keep a stored trace small."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        optional = {
            "tool_call_id": self.tool_call_id,
            "pinned": self.pinned or None,
            "reasoning": self.reasoning,
            "name": self.name,
        }
        data.update((key, value) for key, value in optional.items() if value is not None)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> ChatMessage:
        """A message from :meth:`to_dict`'s form; ``ValueError`` when it is not one (a
        stored trace is data from outside the process)."""
        if not isinstance(data, dict):
            raise ValueError(f"a message must be an object, not {type(data).__name__}")
        role, content = data.get("role"), data.get("content", "")
        if role not in _ROLES:
            raise ValueError(f"unknown message role {role!r}")
        if content is not None and not isinstance(content, str | list):
            raise ValueError("a message's content must be text, a list of parts or null")
        if isinstance(content, list) and not all(isinstance(p, dict) for p in content):
            raise ValueError("a message's content parts must be objects")
        raw_calls = data.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise ValueError("a message's tool_calls must be a list")
        optional = {}
        for key in ("tool_call_id", "reasoning", "name"):
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"a message's {key} must be a string")
            optional[key] = value
        return cls(
            role,
            content,
            tool_calls=[ToolCall.from_dict(call) for call in raw_calls] or None,
            pinned=data.get("pinned") is True,
            **optional,
        )
