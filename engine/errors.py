"""The engine's exception hierarchy and the repeated-error guard.

Provider errors live in :mod:`engine.llm.base` and :class:`~engine.cancel.CancelledRun` in
:mod:`engine.cancel`; this module holds what the loop itself raises, plus
:class:`ErrorTracker`, which stops a run that keeps hitting the same wall instead of
burning its iteration budget.
"""

from __future__ import annotations

from collections import Counter

__all__ = [
    "AgentPaused",
    "EngineError",
    "ErrorTracker",
    "ScriptExhaustedError",
    "UnknownToolError",
]

DEFAULT_REPEAT_LIMIT = 3


class EngineError(Exception):
    """Base of the errors the engine itself raises (not the provider's)."""


class AgentPaused(EngineError):
    """A loop guard stopped the run; the user may resume it later.

    ``reason`` is a machine-readable cause (``repeated_error``, ``no_progress``) and the
    message is the user-facing explanation that becomes the result's answer.
    """

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason


class UnknownToolError(EngineError):
    """The model named a tool that is not in the registry of this run."""


class ScriptExhaustedError(EngineError, AssertionError):
    """A :class:`~testing.scripted_llm.ScriptedLLM` got more requests than scripted."""


class ErrorTracker:
    """Counts failures by signature ``ErrorType:message`` over one run.

    Counts accumulate (they are not reset by a success in between): a model that
    alternates one failing call with other work is still stuck. The ``limit``-th
    identical failure sets :attr:`should_stop`.
    """

    def __init__(self, limit: int = DEFAULT_REPEAT_LIMIT) -> None:
        self.limit = limit
        self.counts: Counter[str] = Counter()
        self.repeated: str | None = None

    @staticmethod
    def signature(error_type: str, message: str) -> str:
        return f"{error_type}:{message}"

    def record(self, error_type: str, message: str) -> int:
        """Count one failure and return how often this signature has occurred."""
        sig = self.signature(error_type, message)
        self.counts[sig] += 1
        count = self.counts[sig]
        if count >= self.limit and self.repeated is None:
            self.repeated = sig
        return count

    @property
    def should_stop(self) -> bool:
        return self.repeated is not None

    def reset(self) -> None:
        self.counts.clear()
        self.repeated = None
