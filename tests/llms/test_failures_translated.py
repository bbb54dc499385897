"""A failed model request is told in the user's language: every sentence the engine's
plain_message can give is one the catalogues translate."""

from __future__ import annotations

import pytest
from django.utils import translation

from engine.llm.base import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    LLMError,
    LLMTimeoutError,
    QuotaExceededError,
    RateLimitError,
    StreamEndedEarly,
    UnavailableError,
    plain_message,
)
from llms.failures import PLAIN_MESSAGES, failure_message

FAILURES = [
    AuthenticationError("401"),
    RateLimitError("429"),
    QuotaExceededError("429 insufficient_quota"),
    ContextOverflowError("too long"),
    BadRequestError("400"),
    LLMTimeoutError("slow"),
    StreamEndedEarly("cut"),
    UnavailableError("refused"),
    UnavailableError("500", status_code=500),
    LLMError("other"),
]


@pytest.mark.parametrize("exc", FAILURES, ids=lambda e: type(e).__name__ + str(e))
def test_each_failure_sentence_is_marked_and_translated(exc: LLMError) -> None:
    english = plain_message(exc)
    assert english in PLAIN_MESSAGES
    with translation.override("ja"):
        japanese = failure_message(exc)
    with translation.override("zh-hans"):
        chinese = failure_message(exc)
    assert japanese != english and chinese != english and japanese != chinese


def test_every_marked_sentence_is_one_the_engine_gives() -> None:
    assert {plain_message(exc) for exc in FAILURES} == set(PLAIN_MESSAGES)
