"""What the provider commands read from the environment (a key is never an argument of
its own there: it would stay in the shell's history and the process list)."""

from __future__ import annotations

import os

from django.core.management.base import CommandError

__all__ = ["api_key_from_environment"]


def api_key_from_environment(variable: str | None) -> str | None:
    """The API key in ``variable`` (None without a variable or for an empty value); a
    variable that is not set is the command's error."""
    if not variable:
        return None
    value = os.environ.get(variable)
    if value is None:
        raise CommandError(f"environment variable {variable} is not set")
    return value.strip() or None
