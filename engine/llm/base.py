"""The LLM provider protocol, its response types and the one exception tree.

Every provider (OpenAI-compatible HTTP, the scripted test double, future native SDKs)
implements :class:`LLM`. Errors are mapped onto the tree below so the agent can decide
what to retry and what to show, whatever the upstream server said.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engine.messages import ChatMessage, ToolCall, Usage

__all__ = [
    "ABILITY_NAMES",
    "LLM",
    "AuthenticationError",
    "BadRequestError",
    "ChatDelta",
    "ChatResponse",
    "ContextOverflowError",
    "LLMError",
    "LLMTimeoutError",
    "RateLimitError",
    "UnavailableError",
    "Usage",
    "default_abilities",
]

ABILITY_NAMES = ("tool_call", "json_mode", "tool_choice", "streaming", "vision", "json_schema")


def ascii_chars(text: str) -> int:
    """How many characters of ``text`` are ASCII (token estimates weigh them apart).

    Counted in C (encoding to ASCII drops exactly the others): the whole prompt is
    checked on every call.
    """
    return len(text) if text.isascii() else len(text.encode("ascii", "ignore"))


def default_abilities(overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Conservative abilities: plain chat with streaming, nothing else assumed."""
    abilities: dict[str, Any] = {
        "tool_call": False,
        "json_mode": False,
        "tool_choice": True,
        "streaming": True,
        "vision": False,
        "json_schema": False,
    }
    abilities.update(overrides or {})
    return abilities


@dataclass
class ChatResponse:
    """A complete (non-streamed) reply."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_content: str | None = None
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


@dataclass
class ChatDelta:
    """One streamed fragment. ``tool_calls`` is set only on the final delta, assembled."""

    content: str = ""
    reasoning_content: str = ""
    tool_calls: list[ToolCall] | None = None
    usage: Usage | None = None
    finish_reason: str | None = None


@runtime_checkable
class LLM(Protocol):
    """What the agent needs from a chat model."""

    abilities: dict[str, Any]

    async def chat(
        self,
        messages: Sequence[ChatMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        response_format: dict[str, Any] | None = None,
        **opts: Any,
    ) -> ChatResponse: ...

    def stream_chat(
        self, messages: Sequence[ChatMessage], **opts: Any
    ) -> AsyncIterator[ChatDelta]: ...


class LLMError(Exception):
    """Base of every provider error. ``retryable`` tells the caller a retry may succeed."""

    retryable: bool = False

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.request = ""  # which request failed (method, URL, model): for the details

    def about(self, request: str) -> LLMError:
        """This error, saying which request failed (e.g. ``POST <url>, model m``): staff
        read it in the run's details; users never see it (:func:`plain_message`)."""
        self.request = request
        self.message = f"{self.message} (request: {request})"
        self.args = (self.message,)
        return self


class AuthenticationError(LLMError):
    """401/403: wrong or missing API key. Never retried."""


class RateLimitError(LLMError):
    """429: slow down; ``retry_after`` seconds if the server said so."""

    retryable = True

    def __init__(
        self, message: str, *, status_code: int | None = 429, retry_after: float | None = None
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.retry_after = retry_after


class QuotaExceededError(RateLimitError):
    """429 saying the account's quota or credit is spent (OpenAI's ``insufficient_quota``):
    unlike a rate limit, waiting does not help, so it is never retried."""

    retryable = False


class BadRequestError(LLMError):
    """400/404/422: the request itself is wrong (e.g. forced tool_choice unsupported)."""


class ContextOverflowError(BadRequestError):
    """The prompt exceeds the model's context window."""


class UnavailableError(LLMError):
    """5xx or connection failure: the server is down or overloaded."""

    retryable = True


class StreamEndedEarly(UnavailableError):
    """The stream's body ended cleanly but its reply did not: no choice carried a
    ``finish_reason`` and no ``[DONE]`` came. Taken for a cut stream, never a whole reply."""


class LLMTimeoutError(LLMError):
    """The request took longer than the configured timeout."""

    retryable = True


def plain_message(exc: LLMError) -> str:
    """What a user is told about a failed model request: plain words and what to do,
    never the provider's URL or response (those are for the logs and the admin)."""
    if isinstance(exc, AuthenticationError):
        return (
            "The model's provider refused its API key. "
            "An administrator needs to check the provider's settings."
        )
    if isinstance(exc, QuotaExceededError):
        return (
            "The model provider's quota for this site is spent. "
            "An administrator needs to check the provider's plan or billing."
        )
    if isinstance(exc, RateLimitError):
        return "The model's provider is busy right now (rate limit). Retry in a moment."
    if isinstance(exc, ContextOverflowError):
        return (
            "The conversation is too long for this model. "
            "Start a new chat, or pick a model with a larger context."
        )
    if isinstance(exc, BadRequestError):
        return (
            "The model's provider refused the request. "
            "An administrator can see why in the run's details."
        )
    if isinstance(exc, LLMTimeoutError):
        return "The model's server did not answer in time. Retry?"
    if isinstance(exc, StreamEndedEarly):
        return "The model's server stopped answering before the reply was complete. Retry?"
    if isinstance(exc, UnavailableError) and exc.status_code is None:
        return (
            "The model's server could not be reached (no connection). Retry, or an "
            "administrator can check that it is running at the provider's address."
        )
    if isinstance(exc, UnavailableError):
        return (
            "The model's server answered with an error of its own (it failed or is "
            "overloaded). Retry, or an administrator can see why in the run's details."
        )
    return "The request to the model failed. Retry?"
