"""agentsite's framework-free agent engine.

Pure Python, asyncio and httpx: nothing here imports Django. The names in ``__all__`` are
the public API (DESIGN.md section 2); plan mode lives in :mod:`engine.plan`. The error
tree lives in :mod:`engine.llm.base` (provider errors) and :mod:`engine.errors` (loop
errors).
"""

from __future__ import annotations

from engine.agent import AgentResult, ReActAgent, Step
from engine.cancel import CancelledRun, CancelToken
from engine.context import (
    CompactionResult,
    ContextGuard,
    estimate_messages_tokens,
    estimate_tokens,
    model_budget,
    smart_truncate,
)
from engine.errors import EngineError, ErrorTracker
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
from engine.llm.openai import OpenAICompatibleLLM
from engine.llm.registry import ModelRegistry
from engine.messages import ChatMessage, ToolCall, Usage
from engine.plan import (
    Plan,
    PlanAgent,
    PlanConfig,
    PlanError,
    PlanStep,
    choose_mode,
    parse_plan,
    validate_plan,
)
from engine.selection import TOOL_SELECTION_MAX, TOOL_SELECTION_THRESHOLD
from engine.structured import (
    StructuredCallResult,
    StructuredOutputError,
    extract_json,
    structured_llm_call,
)
from engine.tools import Artifact, Tool, ToolExample, ToolRegistry, ToolResult, tool

__all__ = [
    "LLM",
    "TOOL_SELECTION_MAX",
    "TOOL_SELECTION_THRESHOLD",
    "AgentEvent",
    "AgentResult",
    "Artifact",
    "AuthenticationError",
    "BadRequestError",
    "CancelToken",
    "CancelledRun",
    "ChatDelta",
    "ChatMessage",
    "ChatResponse",
    "CompactionResult",
    "ContextGuard",
    "ContextOverflowError",
    "EngineError",
    "ErrorTracker",
    "InterruptQueue",
    "LLMError",
    "LLMTimeoutError",
    "ModelRegistry",
    "OpenAICompatibleLLM",
    "Plan",
    "PlanAgent",
    "PlanConfig",
    "PlanError",
    "PlanStep",
    "RateLimitError",
    "ReActAgent",
    "Step",
    "StructuredCallResult",
    "StructuredOutputError",
    "Tool",
    "ToolCall",
    "ToolRegistry",
    "ToolExample",
    "ToolResult",
    "UnavailableError",
    "Usage",
    "choose_mode",
    "estimate_messages_tokens",
    "estimate_tokens",
    "extract_json",
    "model_budget",
    "parse_plan",
    "smart_truncate",
    "structured_llm_call",
    "tool",
    "validate_plan",
]
