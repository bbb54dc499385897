"""Chat messages exchanged between the engine and LLM providers.

Kept as plain dataclasses so the web layer can map database rows onto them without the
engine knowing anything about Django.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ChatMessage", "ToolCall", "Usage"]


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
