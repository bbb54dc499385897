"""agentsite's framework-free agent engine.

Pure Python, asyncio and httpx: nothing here imports Django. The names in ``__all__`` are
the public API (DESIGN.md section 2).
"""

from __future__ import annotations

from engine.cancel import CancelledRun, CancelToken
from engine.events import AgentEvent
from engine.interrupts import InterruptQueue
from engine.llm.base import (
    LLM,
    AuthenticationError,
    BadRequestError,
    ChatDelta,
    ChatResponse,
    ContextOverflowError,
    LLMError,
    LLMTimeoutError,
    RateLimitError,
    UnavailableError,
)
from engine.messages import ChatMessage, ToolCall, Usage
from engine.tools import Artifact, Tool, ToolRegistry, ToolResult, tool

__all__ = [
    "LLM",
    "AgentEvent",
    "Artifact",
    "AuthenticationError",
    "BadRequestError",
    "CancelToken",
    "CancelledRun",
    "ChatDelta",
    "ChatMessage",
    "ChatResponse",
    "ContextOverflowError",
    "InterruptQueue",
    "LLMError",
    "LLMTimeoutError",
    "RateLimitError",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolResult",
    "UnavailableError",
    "Usage",
    "tool",
]
