"""A failed model request in the user's language.

The engine stays framework-free (no Django, so no gettext): its
:func:`engine.llm.base.plain_message` says in English what a user is told when a model
request fails. The same sentences are marked here, so the catalogues hold them, and
:func:`failure_message` gives the one for ``exc`` in the active language (the run's
worker activates its conversation owner's). Any other text comes back unchanged.
"""

from __future__ import annotations

from django.utils.translation import gettext, gettext_noop

from engine.llm.base import LLMError, plain_message

__all__ = ["PLAIN_MESSAGES", "RETRY_USELESS", "failure_message", "retry_helps", "translated"]

# Exactly the sentences of engine/llm/base.py's plain_message: keep the two in step.
PLAIN_MESSAGES = (
    gettext_noop(
        "The model's provider refused its API key. "
        "An administrator needs to check the provider's settings."
    ),
    gettext_noop(
        "The model provider's quota for this site is spent. "
        "An administrator needs to check the provider's plan or billing."
    ),
    gettext_noop("The model's provider is busy right now (rate limit). Retry in a moment."),
    gettext_noop(
        "The conversation is too long for this model. "
        "Start a new chat, or pick a model with a larger context."
    ),
    gettext_noop(
        "The model's provider refused the request. "
        "An administrator can see why in the run's details."
    ),
    gettext_noop("The model's server did not answer in time. Retry?"),
    gettext_noop("The model's server stopped answering before the reply was complete. Retry?"),
    gettext_noop(
        "The model's server could not be reached (no connection). Retry, or an "
        "administrator can check that it is running at the provider's address."
    ),
    gettext_noop(
        "The model's server answered with an error of its own (it failed or is "
        "overloaded). Retry, or an administrator can see why in the run's details."
    ),
    gettext_noop("The request to the model failed. Retry?"),
)


def translated(text: str) -> str:
    """``text`` in the active language when it is one of :data:`PLAIN_MESSAGES`."""
    return gettext(text) if text in PLAIN_MESSAGES else text


def failure_message(exc: LLMError) -> str:
    """What a user is told about ``exc``, in the active language."""
    return translated(plain_message(exc))


# The failures a Retry cannot cure (the API key, the quota, the request itself, a
# conversation too long for the model): shown without Retry. The others (timeouts, a
# server unreachable or failing, a rate limit, a cut stream) may pass.
RETRY_USELESS = frozenset(PLAIN_MESSAGES[i] for i in (0, 1, 3, 4))


def retry_helps(failure: str | LLMError) -> bool:
    """Whether retrying may help after ``failure``: a model error, or the English text
    :func:`plain_message` told it with (True for any other text)."""
    plain = plain_message(failure) if isinstance(failure, LLMError) else failure
    return plain not in RETRY_USELESS
