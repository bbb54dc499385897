"""What one run adds to the process's metrics (:mod:`core.metrics`)."""

from __future__ import annotations

import time
from typing import Any

from core.metrics import (
    LLM_FIRST_TOKEN,
    LLM_TOKENS,
    RUN_DURATION,
    RUNS,
    RUNS_STARTED,
    TOOL_CALLS,
    TOOL_ERRORS,
)
from engine.events import AgentEvent, AnswerDelta, IterationDone, ThoughtDelta
from engine.messages import Usage


def model_label(model: Any) -> str:
    """The model as the metrics name it ("none": a run whose model could not be set up)."""
    if model is None:
        return "none"
    return str(model.display_name or model.model_id)


class RunMeter:
    """Counts a run once it started: its first token, its tool calls, its end."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.model = ""
        self._first_token_seen = False

    def start(self, model: Any) -> None:
        self.model = model_label(model)
        RUNS_STARTED.inc()

    def on_event(self, event: AgentEvent) -> None:
        if isinstance(event, AnswerDelta | ThoughtDelta) and not self._first_token_seen:
            self._first_token_seen = True
            LLM_FIRST_TOKEN.labels(self.model).observe(time.perf_counter() - self.started)
        elif isinstance(event, IterationDone):
            TOOL_CALLS.labels(event.tool_name).inc()
            if event.error:
                TOOL_ERRORS.labels(event.tool_name).inc()

    def end(self, status: str, usage: Usage | None) -> None:
        """Only for a run that started (:meth:`start`)."""
        RUNS.labels(status).inc()
        RUN_DURATION.labels(status).observe(time.perf_counter() - self.started)
        if usage is not None:
            LLM_TOKENS.labels(self.model, "prompt").inc(usage.prompt_tokens)
            LLM_TOKENS.labels(self.model, "completion").inc(usage.completion_tokens)
