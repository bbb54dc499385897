"""Rows a request names in its body, looked up for the requesting user."""

from __future__ import annotations

from core.errors import ApplicationError
from llms.models import LLMModel
from llms.selectors import model_get_for_user

__all__ = ["model_for"]


def model_for(user, model_id: int) -> LLMModel:
    """The model row for a request's ``model`` id; a field error when not allowed."""
    try:
        return model_get_for_user(user=user, model_id=model_id)
    except ApplicationError as exc:
        raise ApplicationError(exc.message, extra={"model": [exc.message]}) from None
